// Node 20 lacks Promise.withResolvers (Node 22 has it); js-libp2p 3.x uses it.
// Imported first by every script here, before any libp2p module runs.
if (typeof Promise.withResolvers !== 'function') {
  Promise.withResolvers = function withResolvers () {
    let resolve, reject
    const promise = new this((res, rej) => { resolve = res; reject = rej })
    return { promise, resolve, reject }
  }
}
