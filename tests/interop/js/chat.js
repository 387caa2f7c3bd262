// /gbr/chat/1.0.0 written from protocols/gbr-chat-1.0.0.md alone (and mcp.js's framing).
// Usage:
//   node chat.js send SEED_HEX MULTIADDR 'MESSAGES_JSON'
//     MESSAGES_JSON is an array of {text, message_id?, context_id?}; each goes in a
//     message/send request on its own new stream. Prints {"peerId", "responses"}.
//   node chat.js receive SEED_HEX TRUSTED_PEER_ID
//     Accepts messages from TRUSTED_PEER_ID (acks accepted, or duplicate for an id seen
//     before); refuses anyone else with -32001. Prints {"peerId", "addrs"} once
//     listening, then one line per message received; stops when stdin closes.
import './polyfill.js'
import { randomUUID } from 'node:crypto'
import { multiaddr } from '@multiformats/multiaddr'
import { createNode, readFrame, stopAndExit, writeFrame } from './mcp.js'

export const CHAT = '/gbr/chat/1.0.0'
const [mode, seedHex, arg, messagesJson] = process.argv.slice(2)

function messageSend (id, spec) {
  return {
    jsonrpc: '2.0',
    id,
    method: 'message/send',
    params: {
      message: {
        kind: 'message',
        message_id: spec.message_id ?? randomUUID(),
        context_id: spec.context_id ?? randomUUID(),
        role: 'agent',
        parts: [{ kind: 'text', text: spec.text }],
        sent_at: new Date().toISOString()
      }
    }
  }
}

if (mode === 'send') {
  const node = await createNode(seedHex)
  const responses = []
  let failed = false
  try {
    let id = 0
    for (const spec of JSON.parse(messagesJson)) {
      const stream = await node.dialProtocol(multiaddr(arg), CHAT)
      await writeFrame(stream, messageSend(++id, spec))
      responses.push(await readFrame(stream))
      await stream.close()
    }
  } catch (err) {
    failed = true
    console.error(err)
  }
  console.log(JSON.stringify({ peerId: node.peerId.toString(), responses }))
  await stopAndExit(node, failed ? 1 : 0)
} else {
  const trusted = arg
  const seen = new Set()
  const node = await createNode(seedHex, ['/ip4/127.0.0.1/tcp/0'])
  await node.handle(CHAT, async (stream, connection) => {
    const caller = connection.remotePeer.toString()
    let response
    if (caller !== trusted) {
      response = { jsonrpc: '2.0', id: null, error: { code: -32001, message: 'this node does not trust your peer ID' } }
    } else {
      const request = await readFrame(stream)
      const message = request?.params?.message
      const ok = request?.method === 'message/send' && typeof message?.message_id === 'string' &&
        Array.isArray(message?.parts) && message.parts.some(p => p.kind === 'text')
      if (!ok) {
        response = { jsonrpc: '2.0', id: request?.id ?? null, error: { code: -32602, message: 'invalid params' } }
      } else {
        const status = seen.has(message.message_id) ? 'duplicate' : 'accepted'
        seen.add(message.message_id)
        response = { jsonrpc: '2.0', id: request.id, result: { kind: 'ack', message_id: message.message_id, status } }
        console.log(JSON.stringify({ caller, message, status }))
      }
    }
    await writeFrame(stream, response)
    await stream.close()
  })
  console.log(JSON.stringify({ peerId: node.peerId.toString(), addrs: node.getMultiaddrs().map(String) }))
  process.stdin.resume()
  process.stdin.on('end', () => stopAndExit(node))
}
