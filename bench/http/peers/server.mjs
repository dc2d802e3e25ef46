// bench/http/peers/server.mjs — the payments sample's POST /payments on Express, guarded by an npm
// idempotency middleware on Redis, written the way each package's README says. Benchmark only.
//
//   node server.mjs --peer express-idempotency|node-idempotency --redis HOST:PORT [--port N]
//
// Prints `listening on 127.0.0.1:PORT` once it serves (as idem_sample_payments does). The route
// validates {"amount": <int>, "currency": "<3 capitals>"} as the sample does, answers 201 with
// {"id", "amount", "currency"} and a Location, and 400 problem+json otherwise. One process, one
// thread: how a Node service is deployed per core.
import { randomUUID } from "node:crypto";
import { parseArgs } from "node:util";

import express from "express";

const { values: args } = parseArgs({
  options: { peer: { type: "string" }, redis: { type: "string" }, port: { type: "string", default: "0" } },
});
if (!args.peer || !args.redis) {
  console.error("usage: node server.mjs --peer express-idempotency|node-idempotency --redis HOST:PORT [--port N]");
  process.exit(2);
}
const redisUrl = `redis://${args.redis}`;

// The sample's validation and answer.
function place(body) {
  if (
    typeof body !== "object" || body === null || !Number.isInteger(body.amount) ||
    typeof body.currency !== "string" || !/^[A-Z]{3}$/.test(body.currency)
  )
    return {
      status: 400,
      type: "application/problem+json",
      body: { title: "Invalid payment", status: 400, detail: 'expected {"amount": <int>, "currency": "<code>"}' },
    };
  const id = "pay_" + randomUUID().replaceAll("-", "").slice(0, 12);
  return {
    status: 201,
    type: "application/json",
    location: `/payments/${id}`,
    body: { id, amount: body.amount, currency: body.currency },
  };
}

function send(res, answer) {
  res.status(answer.status).type(answer.type);
  if (answer.location) res.location(answer.location);
  res.send(JSON.stringify(answer.body));
}

const app = express();
app.disable("x-powered-by");
app.use(express.json());

if (args.peer === "express-idempotency") {
  // README: app.use(idempotency({ dataAdapter })), and every handler checks isHit(req).
  const { idempotency, getSharedIdempotencyService } = (await import("express-idempotency")).default;
  const RedisAdapter = (await import("express-idempotency-redis-adapter")).default.default;
  const adapter = new RedisAdapter({ connectionConfig: { url: redisUrl } });
  await adapter.connect();
  app.post("/payments", idempotency({ dataAdapter: adapter }), (req, res) => {
    if (getSharedIdempotencyService().isHit(req)) return;
    send(res, place(req.body));
  });
} else if (args.peer === "node-idempotency") {
  // README: onRequest before the business logic (a stored response, or undefined for a new
  // request), onResponse once it completed; errors carry a code.
  const { Idempotency, IdempotencyErrorCodes } = await import("@node-idempotency/core");
  const { RedisStorageAdapter } = await import("@node-idempotency/storage-adapter-redis");
  const storage = new RedisStorageAdapter({ url: redisUrl });
  await storage.connect();
  const idempotency = new Idempotency(storage, {});
  const statusOf = {
    [IdempotencyErrorCodes.IDEMPOTENCY_KEY_MISSING]: 400,
    [IdempotencyErrorCodes.IDEMPOTENCY_KEY_LEN_EXEEDED]: 400,
    [IdempotencyErrorCodes.IDEMPOTENCY_FINGERPRINT_MISSMATCH]: 422,
    [IdempotencyErrorCodes.REQUEST_IN_PROGRESS]: 409,
  };
  app.post("/payments", async (req, res) => {
    const request = { headers: req.headers, path: req.path, body: req.body, method: req.method };
    let stored;
    try {
      stored = await idempotency.onRequest(request);
    } catch (error) {
      const status = statusOf[error.code] ?? 500;
      return res.status(status).type("application/problem+json").send(JSON.stringify({ title: error.code, status }));
    }
    if (stored) return send(res, stored.additional.answer);
    const answer = place(req.body);
    await idempotency.onResponse(request, { body: answer.body, additional: { status: answer.status, answer } });
    send(res, answer);
  });
} else {
  console.error(`unknown peer ${args.peer}`);
  process.exit(2);
}

const server = app.listen(Number(args.port), "127.0.0.1", () => {
  console.log(`listening on 127.0.0.1:${server.address().port}`);
});
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => process.exit(0));
