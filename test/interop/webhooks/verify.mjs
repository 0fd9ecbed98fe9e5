// Verifies webhooks captured from a Switchboard hub with the Standard
// Webhooks reference library (npm standardwebhooks). Run by
// webhooks_test.go with the path of a JSON file:
//
//   {"cases": [{"name": "...", "secret": "whsec_...", "headers": {...}, "body_base64": "..."}]}
//
// It prints one line per case, "verified NAME" or "refused NAME: reason",
// and exits 0 once every case has been tried.
import { readFileSync } from "node:fs";
import { Webhook } from "standardwebhooks";

const input = JSON.parse(readFileSync(process.argv[2], "utf8"));
for (const c of input.cases) {
  const body = Buffer.from(c.body_base64, "base64").toString("utf8");
  try {
    new Webhook(c.secret).verify(body, c.headers);
    console.log("verified " + c.name);
  } catch (e) {
    console.log("refused " + c.name + ": " + (e && e.message));
  }
}
