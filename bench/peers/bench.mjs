// bench/peers/bench.mjs — the npm idempotency libraries on the workload idem_bench_redis runs.
//
//   node bench.mjs --peer powertools|powertools+cache|node-idempotency --address 127.0.0.1:6379
//                  [--calls 2000] [--repeats 5] [--concurrency 1]
//
// Workload, as in bench/redis/redis_bench.cpp: `calls` calls with unique keys (first), the same keys
// again (replay), `calls` calls on one completed key (hot); each phase repeated, median ops/s and
// p50/p99 latency of one call. The wrapped function returns {ok, orderId, amount}. With
// --concurrency C, C async loops run at once on one connection (Node has one thread).
// Every measurement line: RESULT <row> <concurrency> <phase> <ops/s> <p50 us> <p99 us>.
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, arg, i, all) => {
    if (arg.startsWith('--')) pairs.push([arg.slice(2), all[i + 1]]);
    return pairs;
  }, []),
);
const peer = args.peer ?? 'powertools';
const [host, port] = (args.address ?? '127.0.0.1:6379').split(':');
const calls = Number(args.calls ?? 2000);
const repeats = Number(args.repeats ?? 5);
const concurrency = Number(args.concurrency ?? 1);
const url = `redis://${host}:${port}`;

let executions = 0;
const work = async (event) => {
  executions += 1;
  return { ok: true, orderId: event.idempotencyKey, amount: 42 };
};

// Each setup returns { call(key), close() }.
async function powertools(useLocalCache) {
  const { makeIdempotent, IdempotencyConfig } = await import('@aws-lambda-powertools/idempotency');
  const { CachePersistenceLayer } = await import('@aws-lambda-powertools/idempotency/cache');
  const { createClient } = await import('@redis/client');
  const client = await createClient({ url }).connect();
  const config = new IdempotencyConfig({
    eventKeyJmesPath: 'idempotencyKey',
    expiresAfterSeconds: 3600,
    throwOnNoIdempotencyKey: true,
    useLocalCache,
    maxLocalCacheSize: 100000,
  });
  // Without a registered Lambda context 2.35.0 gives records no lease and warns on every call (#5678).
  const lambdaContext = { getRemainingTimeInMillis: () => 30000 };
  config.registerLambdaContext(lambdaContext);
  const fn = makeIdempotent(work, {
    persistenceStore: new CachePersistenceLayer({ client }),
    keyPrefix: 'bench-peers',
    config,
  });
  return { call: (key) => fn({ idempotencyKey: key }, lambdaContext), close: () => client.quit() };
}

async function nodeIdempotency() {
  const { Idempotency } = await import('@node-idempotency/core');
  const { RedisStorageAdapter } = await import('@node-idempotency/storage-adapter-redis');
  const storage = new RedisStorageAdapter({ url });
  await storage.connect();
  const idempotency = new Idempotency(storage, { cacheKeyPrefix: 'bench-peers', cacheTTLMS: 3600 * 1000 });
  const call = async (key) => {
    const req = { headers: { 'idempotency-key': key }, path: '/orders', method: 'POST', body: { orderId: key } };
    const cached = await idempotency.onRequest(req);
    if (cached) return cached.body;
    const body = await work({ idempotencyKey: key });
    await idempotency.onResponse(req, { body });
    return body;
  };
  return { call, close: () => storage.disconnect() };
}

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

async function measure(keyOf, call) {
  const latencies = new Array(calls * concurrency);
  const loop = async (lane) => {
    for (let i = 0; i < calls; i += 1) {
      const t0 = performance.now();
      await call(keyOf(lane, i));
      latencies[lane * calls + i] = (performance.now() - t0) * 1000;
    }
  };
  const start = performance.now();
  await Promise.all(Array.from({ length: concurrency }, (_, lane) => loop(lane)));
  const seconds = (performance.now() - start) / 1000;
  latencies.sort((a, b) => a - b);
  return { ops: (calls * concurrency) / seconds, p50: percentile(latencies, 0.5), p99: percentile(latencies, 0.99) };
}

function median(runs) {
  const sorted = [...runs].sort((a, b) => a.ops - b.ops);
  return sorted[Math.floor(sorted.length / 2)];
}

const setups = {
  powertools: () => powertools(false),
  'powertools+cache': () => powertools(true),
  'node-idempotency': () => nodeIdempotency(),
};
if (!setups[peer]) {
  console.error(`unknown peer ${peer}; one of ${Object.keys(setups).join(', ')}`);
  process.exit(2);
}
const target = await setups[peer]();
// Warm-up: unique keys, not measured.
for (let i = 0; i < 600; i += 1) await target.call(`warm-${randomBytes(8).toString('hex')}`);

const phases = { first: [], replay: [], hot: [] };
for (let r = 0; r < repeats; r += 1) {
  const run = randomBytes(5).toString('hex');
  const keyOf = (lane, i) => `${run}:${lane}:${i}`;
  const before = executions;
  phases.first.push(await measure(keyOf, target.call));
  phases.replay.push(await measure(keyOf, target.call));
  phases.hot.push(await measure(() => keyOf(0, 0), target.call));
  if (executions - before !== calls * concurrency) {
    console.error(`${peer}: the function ran ${executions - before} times for ${calls * concurrency} keys`);
    process.exitCode = 1;
  }
}
for (const [phase, runs] of Object.entries(phases)) {
  const m = median(runs);
  console.log(`RESULT ${peer} ${concurrency} ${phase} ${m.ops.toFixed(0)} ${m.p50.toFixed(1)} ${m.p99.toFixed(1)}`);
}
await target.close();
