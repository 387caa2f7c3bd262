// /gbr/mcp/1.1.0 written from protocols/gbr-mcp-1.1.0.md alone (and mcp.js's framing):
// many requests in flight on one stream, answered in any order, matched by id.
// Usage:
//   node pipelined.js call SEED_HEX MULTIADDR 'REQUESTS_JSON' 'CANCEL_IDS_JSON'
//     Opens one stream proposing /gbr/mcp/1.1.0 then /gbr/mcp/1.0.0, sends every request
//     of REQUESTS_JSON ([id, method, params] each) at once, then notifications/cancelled
//     for each id of CANCEL_IDS_JSON once its request is sent; reads until every request
//     not cancelled is answered (or an id-null error ends the stream). Prints one JSON
//     object: {"peerId", "protocol", "responses": [...in arrival order]}.
//   node pipelined.js serve SEED_HEX TRUSTED_PEER_ID
//     Serves `reverse {text, delay_ms?}` on /gbr/mcp/1.1.0 (each request answered after
//     delay_ms, concurrently; notifications/cancelled withdraws one) and on
//     /gbr/mcp/1.0.0 (one request per stream), to TRUSTED_PEER_ID only. Prints
//     {"peerId", "addrs"} once listening, then one line per event; stops when stdin closes.
import './polyfill.js'
import { multiaddr } from '@multiformats/multiaddr'
import { PROTOCOL, createNode, decodeVarint, encodeFrame, readFrame, stopAndExit, writeFrame, MAX_MESSAGE_BYTES } from './mcp.js'

export const PIPELINED = '/gbr/mcp/1.1.0'
const STREAM_LIMITS = { maxInboundStreams: 64, maxOutboundStreams: 64 }
const [mode, seedHex, arg, requestsJson, cancelJson] = process.argv.slice(2)

// Calls onFrame(message) for each whole frame arriving on `stream`, onEnd() at its end.
function frames (stream, onFrame, onEnd) {
  let buffer = new Uint8Array(0)
  stream.addEventListener('message', (evt) => {
    const bytes = evt.data.subarray()
    const joined = new Uint8Array(buffer.length + bytes.length)
    joined.set(buffer, 0)
    joined.set(bytes, buffer.length)
    buffer = joined
    for (;;) {
      const prefix = decodeVarint(buffer)
      if (prefix === null) return
      if (prefix.length > MAX_MESSAGE_BYTES) throw new Error('frame too large')
      const end = prefix.prefixBytes + prefix.length
      if (buffer.length < end) return
      const body = buffer.subarray(prefix.prefixBytes, end)
      buffer = buffer.slice(end)
      onFrame(JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(body)))
    }
  })
  stream.addEventListener('remoteCloseWrite', onEnd)
  stream.addEventListener('close', onEnd)
}

function send (stream, message) {
  stream.send(encodeFrame(message))
}

const reversed = (text) => [...text].reverse().join('')

function answer (request) {
  const error = (code, message) => ({ jsonrpc: '2.0', id: request.id, error: { code, message } })
  const params = request.params ?? {}
  if (request.method !== 'tools/call') return error(-32601, `method not found: ${request.method}`)
  if (params.name !== 'reverse') return error(-32602, `unknown tool ${JSON.stringify(params.name)}`)
  const text = params.arguments?.text
  if (typeof text !== 'string') return error(-32602, 'reverse: arguments.text must be a string')
  return { jsonrpc: '2.0', id: request.id, result: { content: [{ type: 'text', text: reversed(text) }], isError: false } }
}

if (mode === 'call') {
  const node = await createNode(seedHex)
  const requests = JSON.parse(requestsJson)
  const cancelled = new Set(JSON.parse(cancelJson ?? '[]'))
  const responses = []
  let failed = false
  let protocol = null
  try {
    const stream = await node.dialProtocol(multiaddr(arg), [PIPELINED, PROTOCOL])
    protocol = stream.protocol
    const waiting = new Set(requests.map(([id]) => id).filter((id) => !cancelled.has(id)))
    const done = new Promise((resolve) => {
      frames(stream, (message) => {
        responses.push(message)
        if (message.id === null) resolve()
        waiting.delete(message.id)
        if (waiting.size === 0) resolve()
      }, resolve)
    })
    for (const [id, method, params] of requests) {
      const request = { jsonrpc: '2.0', id, method }
      if (params !== null && params !== undefined) request.params = params
      send(stream, request)
      if (cancelled.has(id)) {
        await new Promise((resolve) => setTimeout(resolve, 300)) // let it start there
        send(stream, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: 'js gave up' } })
      }
    }
    await done
    await stream.close()
  } catch (err) {
    failed = true
    console.error(err)
  }
  console.log(JSON.stringify({ peerId: node.peerId.toString(), protocol, responses }))
  await stopAndExit(node, failed ? 1 : 0)
} else if (mode === 'serve') {
  const trusted = arg
  const node = await createNode(seedHex, ['/ip4/127.0.0.1/tcp/0'])
  const log = (event) => console.log(JSON.stringify(event))
  await node.handle(PIPELINED, (stream, connection) => {
    const caller = connection.remotePeer.toString()
    log({ stream: PIPELINED, caller })
    if (caller !== trusted) {
      send(stream, { jsonrpc: '2.0', id: null, error: { code: -32001, message: 'this node does not trust your peer ID' } })
      stream.close().catch(() => {})
      return
    }
    const timers = new Map()
    let ended = false
    const closeWhenIdle = () => { if (ended && timers.size === 0) stream.close().catch(() => {}) }
    frames(stream, (message) => {
      if (message.method === 'notifications/cancelled') {
        const id = message.params?.requestId
        if (timers.has(id)) {
          clearTimeout(timers.get(id))
          timers.delete(id)
          log({ cancelled: id })
          closeWhenIdle()
        }
        return
      }
      if (message.id === undefined) return
      const delay = Number(message.params?.arguments?.delay_ms ?? 0)
      timers.set(message.id, setTimeout(() => {
        timers.delete(message.id)
        send(stream, answer(message))
        log({ caller, answered: message.id })
        closeWhenIdle()
      }, delay))
    }, () => { ended = true; closeWhenIdle() })
  }, STREAM_LIMITS)
  await node.handle(PROTOCOL, async (stream, connection) => {
    const caller = connection.remotePeer.toString()
    log({ stream: PROTOCOL, caller })
    const request = await readFrame(stream)
    await writeFrame(stream, caller === trusted ? answer(request) : { jsonrpc: '2.0', id: null, error: { code: -32001, message: 'untrusted' } })
    await stream.close()
    log({ caller, answered: request.id })
  }, STREAM_LIMITS)
  log({ peerId: node.peerId.toString(), addrs: node.getMultiaddrs().map(String) })
  process.stdin.resume()
  process.stdin.on('end', () => stopAndExit(node))
} else {
  console.error('usage: node pipelined.js call SEED MULTIADDR REQUESTS [CANCEL_IDS] | serve SEED TRUSTED_PEER_ID')
  process.exit(2)
}
