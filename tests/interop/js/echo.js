// The js-libp2p echo floor of scripts/bench/rpc.py (issue 35): what js-libp2p itself
// does per call, between two separate node processes, on loopback.
// Usage:
//   node echo.js serve SEED_HEX
//     Echoes every byte of /gbr-bench/echo/1.0.0 streams back; closes its side when
//     the caller closes its. Prints {"peerId", "addrs"} once listening; stops when
//     stdin closes.
//   node echo.js bench SEED_HEX MULTIADDR RUNS CALLS CONCURRENCY
//     Against an echo server: RUNS round trips of 1 KiB on a new stream each, RUNS on
//     one kept stream, then CALLS round trips CONCURRENCY at a time over one connection
//     (new streams; then one kept stream per worker). Prints one JSON line:
//     {"new_ms": [...], "kept_ms": [...], "new_rate": calls/s, "kept_rate": calls/s}.
import './polyfill.js'
import { multiaddr } from '@multiformats/multiaddr'
import { createNode, stopAndExit } from './mcp.js'

export const ECHO = '/gbr-bench/echo/1.0.0'
const PAYLOAD = new Uint8Array(1024).fill(120)
const STREAM_LIMITS = { maxInboundStreams: 4096, maxOutboundStreams: 4096 }
const [mode, seedHex, target, runs, calls, concurrency] = process.argv.slice(2)

// A kept reader over a stream's 'message' events: `exactly(n)` resolves with n bytes.
function reader (stream) {
  let buffered = 0
  let waiter = null
  const take = () => {
    if (waiter !== null && buffered >= waiter.size) {
      buffered -= waiter.size
      const { resolve } = waiter
      waiter = null
      resolve()
    }
  }
  stream.addEventListener('message', (evt) => { buffered += evt.data.byteLength; take() })
  stream.addEventListener('close', () => {
    if (waiter !== null) waiter.reject(new Error('stream closed before the echo'))
  })
  return {
    exactly (size) {
      return new Promise((resolve, reject) => { waiter = { size, resolve, reject }; take() })
    }
  }
}

async function send (stream, data) {
  if (!stream.send(data)) await stream.onDrain()
}

async function roundTrip (stream, read) {
  await send(stream, PAYLOAD)
  await read.exactly(PAYLOAD.length)
}

async function newStreamEcho (node, addr) {
  const stream = await node.dialProtocol(addr, ECHO, STREAM_LIMITS)
  await roundTrip(stream, reader(stream))
  await stream.close()
}

async function timed (count, op) {
  const samples = []
  for (let i = 0; i < count; i++) {
    const start = process.hrtime.bigint()
    await op()
    samples.push(Number(process.hrtime.bigint() - start) / 1e6)
  }
  return samples
}

async function rate (total, workers, makeWorker) {
  let left = total
  const start = process.hrtime.bigint()
  await Promise.all(Array.from({ length: workers }, async () => {
    const op = await makeWorker()
    while (left > 0) {
      left--
      await op()
    }
  }))
  return total / (Number(process.hrtime.bigint() - start) / 1e9)
}

async function kept (node, addr) {
  const stream = await node.dialProtocol(addr, ECHO, STREAM_LIMITS)
  const read = reader(stream)
  return () => roundTrip(stream, read)
}

if (mode === 'serve') {
  const node = await createNode(seedHex, ['/ip4/127.0.0.1/tcp/0'])
  await node.handle(ECHO, (stream) => {
    stream.addEventListener('message', (evt) => { stream.send(evt.data) })
    stream.addEventListener('remoteCloseWrite', () => { stream.close().catch(() => {}) })
  }, STREAM_LIMITS)
  console.log(JSON.stringify({ peerId: node.peerId.toString(), addrs: node.getMultiaddrs().map(String) }))
  process.stdin.resume()
  process.stdin.on('end', () => stopAndExit(node))
} else if (mode === 'bench') {
  const node = await createNode(seedHex)
  const addr = multiaddr(target)
  const [n, total, workers] = [Number(runs), Number(calls), Number(concurrency)]
  await node.dial(addr)
  const warm = await kept(node, addr)
  for (let i = 0; i < 50; i++) { await newStreamEcho(node, addr); await warm() }
  const newMs = await timed(n, () => newStreamEcho(node, addr))
  const keptMs = await timed(n, warm)
  const newRate = await rate(total, workers, async () => () => newStreamEcho(node, addr))
  const keptRate = await rate(total, workers, () => kept(node, addr))
  console.log(JSON.stringify({ new_ms: newMs, kept_ms: keptMs, new_rate: newRate, kept_rate: keptRate }))
  await stopAndExit(node)
} else {
  console.error('usage: node echo.js serve SEED_HEX | bench SEED_HEX MULTIADDR RUNS CALLS CONCURRENCY')
  process.exit(2)
}
