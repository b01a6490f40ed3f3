// A webhook receiver that timerq did not write: it verifies every request
// with the reference Standard Webhooks package (npm "standardwebhooks").
// deliver's Go test (TestNodeReceiverVerifiesSignatures) starts it, sends
// signed requests with deliver.Sender, and checks what it answered.
//
// RECEIVER_SECRETS is a JSON object of receiver name to secret: a POST to
// /<name> is verified with that one secret, as a service that knows only
// that key verifies it (during a rotation, some services know the old key
// and some the new). 204 means verified; 401 carries the library's error.
// GET /stats answers {"verified": n, "refused": n}. It prints
// {"port": n} once listening on 127.0.0.1, and exits when stdin closes.
import http from "node:http";
import { Webhook } from "standardwebhooks";

const hooks = Object.fromEntries(
  Object.entries(JSON.parse(process.env.RECEIVER_SECRETS)).map(([name, secret]) => [name, new Webhook(secret)]),
);
const stats = { verified: 0, refused: 0 };

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const name = req.url.slice(1);
    if (req.method === "GET" && name === "stats") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(stats));
      return;
    }
    const wh = hooks[name];
    if (req.method !== "POST" || !wh) {
      res.writeHead(404);
      res.end(`no receiver ${name}`);
      return;
    }
    try {
      wh.verify(Buffer.concat(chunks), req.headers, { jsonParse: false });
      stats.verified++;
      res.writeHead(204);
      res.end();
    } catch (e) {
      stats.refused++;
      res.writeHead(401);
      res.end(`${e.name}: ${e.message}`);
    }
  });
});

server.listen(0, "127.0.0.1", () => {
  process.stdout.write(JSON.stringify({ port: server.address().port }) + "\n");
});
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
