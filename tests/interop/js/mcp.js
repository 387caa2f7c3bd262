// /gbr/mcp/1.0.0 written from protocols/gbr-mcp-1.0.0.md alone: one JSON-RPC 2.0
// message per frame, a frame being an unsigned varint body length (multiformats
// unsigned-varint, minimal, at most 9 bytes) and a UTF-8 JSON body; one request
// and its response per stream. No gbr-node code is used.
import './polyfill.js'
import { createLibp2p } from 'libp2p'
import { tcp } from '@libp2p/tcp'
import { noise } from '@chainsafe/libp2p-noise'
import { yamux } from '@chainsafe/libp2p-yamux'
import { generateKeyPairFromSeed } from '@libp2p/crypto/keys'

export const PROTOCOL = '/gbr/mcp/1.0.0'
export const MAX_MESSAGE_BYTES = 4 * 1024 * 1024

export function encodeVarint (value) {
  const out = []
  do {
    let group = value % 128
    value = Math.floor(value / 128)
    if (value > 0) group |= 0x80
    out.push(group)
  } while (value > 0)
  return Uint8Array.from(out)
}

export function encodeFrame (message) {
  const body = new TextEncoder().encode(JSON.stringify(message))
  const prefix = encodeVarint(body.length)
  const frame = new Uint8Array(prefix.length + body.length)
  frame.set(prefix, 0)
  frame.set(body, prefix.length)
  return frame
}

// Returns {length, prefixBytes} once the prefix is complete, null if more bytes are needed.
export function decodeVarint (bytes) {
  let value = 0
  for (let i = 0; i < bytes.length && i < 9; i++) {
    value += (bytes[i] & 0x7f) * 2 ** (7 * i)
    if ((bytes[i] & 0x80) === 0) {
      if (i > 0 && bytes[i] === 0) throw new Error('non-minimal varint')
      return { length: value, prefixBytes: i + 1 }
    }
  }
  if (bytes.length >= 9) throw new Error('varint longer than 9 bytes')
  return null
}

// Read exactly one frame from a js-libp2p 3.x stream (an async iterable of chunks).
export async function readFrame (stream, maxBytes = MAX_MESSAGE_BYTES) {
  let buffer = new Uint8Array(0)
  for await (const chunk of stream) {
    const bytes = chunk.subarray()
    const joined = new Uint8Array(buffer.length + bytes.length)
    joined.set(buffer, 0)
    joined.set(bytes, buffer.length)
    buffer = joined
    const prefix = decodeVarint(buffer)
    if (prefix === null) continue
    if (prefix.length > maxBytes) throw new Error(`frame of ${prefix.length} bytes above ${maxBytes}`)
    if (buffer.length >= prefix.prefixBytes + prefix.length) {
      const body = buffer.subarray(prefix.prefixBytes, prefix.prefixBytes + prefix.length)
      return JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(body))
    }
  }
  throw new Error(`stream ended inside a frame (${buffer.length} bytes read)`)
}

export async function writeFrame (stream, message) {
  if (!stream.send(encodeFrame(message))) await stream.onDrain()
}

// A js-libp2p node: TCP, Noise, Yamux only, Ed25519 key from a 32-byte hex seed.
export async function createNode (seedHex, listen = []) {
  const privateKey = await generateKeyPairFromSeed('Ed25519', Uint8Array.from(Buffer.from(seedHex, 'hex')))
  return createLibp2p({
    privateKey,
    addresses: { listen },
    transports: [tcp()],
    connectionEncrypters: [noise()],
    streamMuxers: [yamux()],
    // the connection monitor pings with /ipfs/ping/1.0.0, which gbr-node does not serve
    connectionMonitor: { enabled: false },
    // js-libp2p admits 5 inbound connections per second per IP by default
    connectionManager: { inboundConnectionThreshold: 1000 }
  })
}

// Stop the node, then exit. js-libp2p 3.2.0's stop() sometimes never settles when
// the remote side closed the connection at the same moment (gbr-node disconnects
// an untrusted peer right after answering it), so it gets `graceMs` at most.
export async function stopAndExit (node, code = 0, graceMs = 2000) {
  let timer
  const grace = new Promise(resolve => { timer = setTimeout(resolve, graceMs) })
  await Promise.race([node.stop(), grace])
  clearTimeout(timer)
  process.exit(code)
}
