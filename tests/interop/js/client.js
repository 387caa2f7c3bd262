// Usage: node client.js SEED_HEX MULTIADDR 'REQUESTS_JSON'
// REQUESTS_JSON is an array of [method, params]; each request goes on its own new
// stream. Prints one JSON object: {"peerId": ..., "responses": [...]}.
import './polyfill.js'
import { multiaddr } from '@multiformats/multiaddr'
import { PROTOCOL, createNode, readFrame, stopAndExit, writeFrame } from './mcp.js'

const [seedHex, target, requestsJson] = process.argv.slice(2)
const node = await createNode(seedHex)
const responses = []
let failed = false
try {
  let id = 0
  for (const [method, params] of JSON.parse(requestsJson)) {
    const stream = await node.dialProtocol(multiaddr(target), PROTOCOL)
    const request = { jsonrpc: '2.0', id: ++id, method }
    if (params !== null && params !== undefined) request.params = params
    await writeFrame(stream, request)
    responses.push(await readFrame(stream))
    await stream.close()
  }
} catch (err) {
  failed = true
  console.error(err)
}
console.log(JSON.stringify({ peerId: node.peerId.toString(), responses }))
await stopAndExit(node, failed ? 1 : 0)
