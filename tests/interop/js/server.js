// Usage: node server.js SEED_HEX TRUSTED_PEER_ID
// Serves one tool, `reverse {text}`, on /gbr/mcp/1.0.0 to TRUSTED_PEER_ID only.
// Prints {"peerId": ..., "addrs": [...]} on one line once listening, then one line
// per answered request; stops when stdin closes.
import './polyfill.js'
import { PROTOCOL, createNode, readFrame, stopAndExit, writeFrame } from './mcp.js'

const [seedHex, trusted] = process.argv.slice(2)
const REVERSE = {
  name: 'reverse',
  description: 'Reverse a text (served by a js-libp2p peer).',
  inputSchema: {
    type: 'object',
    properties: { text: { type: 'string' } },
    required: ['text'],
    additionalProperties: false
  }
}

function answer (request, caller) {
  const error = (code, message) => ({ jsonrpc: '2.0', id: request.id ?? null, error: { code, message } })
  if (request === null || typeof request !== 'object' || Array.isArray(request) || request.jsonrpc !== '2.0') {
    return { jsonrpc: '2.0', id: null, error: { code: -32600, message: 'invalid request' } }
  }
  if (caller !== trusted) return error(-32001, 'this node does not trust your peer ID')
  const params = request.params ?? {}
  if (request.method === 'tools/list') return { jsonrpc: '2.0', id: request.id, result: { tools: [REVERSE] } }
  if (request.method !== 'tools/call') return error(-32601, `method not found: ${request.method}`)
  if (params.name !== 'reverse') return error(-32602, `unknown tool ${JSON.stringify(params.name)}`)
  const text = params.arguments?.text
  if (typeof text !== 'string') return error(-32602, 'reverse: arguments.text must be a string')
  const reversed = [...text].reverse().join('')
  return { jsonrpc: '2.0', id: request.id, result: { content: [{ type: 'text', text: reversed }], isError: false } }
}

const node = await createNode(seedHex, ['/ip4/127.0.0.1/tcp/0'])
await node.handle(PROTOCOL, async (stream, connection) => {
  const caller = connection.remotePeer.toString()
  let response
  try {
    response = answer(await readFrame(stream), caller)
  } catch (err) {
    response = { jsonrpc: '2.0', id: null, error: { code: -32700, message: `parse error: ${err.message}` } }
  }
  await writeFrame(stream, response)
  await stream.close()
  console.log(JSON.stringify({ caller, response }))
})
console.log(JSON.stringify({ peerId: node.peerId.toString(), addrs: node.getMultiaddrs().map(String) }))
process.stdin.resume()
process.stdin.on('end', () => stopAndExit(node))
