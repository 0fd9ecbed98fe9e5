// Drives the Switchboard dashboard in Debian's headless Chromium through
// playwright-core. Run by dashboard_test.go, which starts a hub with auth
// on, fills it with agents, messages and a dead letter, and passes what to
// expect in the environment:
//
//   BASE_URL, ADMIN_TOKEN, CHROMIUM, SCREENSHOTS,
//   EXPECT_AGENTS (comma separated), EXPECT_CONVERSATION, EXPECT_DEAD_LETTER,
//   LIVE_SENDER, LIVE_RECEIVER (an ATP pair the script sends through while
//   it watches the live flow), EXPECT_AMP_SESSION.
//
// It prints one "step ok: ..." line per check and "dashboard e2e: OK" at
// the end; any failure exits 1 with the reason.
import { chromium } from "playwright-core";
import { mkdtempSync, rmSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`missing environment variable ${k}`);
  return v;
};
const base = env("BASE_URL");
const token = env("ADMIN_TOKEN");
const shots = env("SCREENSHOTS");
const agents = env("EXPECT_AGENTS").split(",");
const conversation = env("EXPECT_CONVERSATION");
const deadLetter = env("EXPECT_DEAD_LETTER");
const ampSession = env("EXPECT_AMP_SESSION");
const TIMEOUT = 15000;

mkdirSync(shots, { recursive: true });
rmSync(join(shots, "failure.png"), { force: true });
const step = (what) => console.log("step ok: " + what);

const userDataDir = mkdtempSync(join(tmpdir(), "switchboard-chromium-"));
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath: env("CHROMIUM"),
  headless: true,
  viewport: { width: 1360, height: 860 },
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const problems = [];
let exitCode = 0;
try {
  const page = context.pages()[0] || await context.newPage();
  page.setDefaultTimeout(TIMEOUT);
  page.on("console", (m) => { if (m.type() === "error") problems.push("console error: " + m.text()); });
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  // Requests the page makes must stay on the hub (no CDN, nothing remote).
  page.on("request", (r) => {
    if (!r.url().startsWith(base) && !r.url().startsWith("data:")) problems.push("off-hub request: " + r.url());
  });

  // 1. Login.
  await page.goto(base + "/dashboard/");
  await page.waitForSelector("#login:not([hidden])");
  await page.screenshot({ path: join(shots, "01-login.png") });
  await page.fill("#token", "sba_not-the-token");
  await page.click("#login-submit");
  await page.waitForSelector("#login-error:not([hidden])");
  step("a wrong token is refused");
  await page.fill("#token", token);
  await page.click("#login-submit");
  await page.waitForSelector("#app:not([hidden])");
  const html = await page.content();
  if (html.includes(token)) throw new Error("the admin token is in the page");
  const jsCookies = await page.evaluate(() => document.cookie);
  if (jsCookies.includes("switchboard_dashboard")) throw new Error("the session cookie is readable from JavaScript");
  if (page.url().includes("token")) throw new Error("the address bar holds the token: " + page.url());
  step("logged in; the token is not in the page and the cookie is HttpOnly");

  // 2. Agents table.
  for (const id of agents) {
    await page.waitForSelector(`#agents-table tr[data-agent="${id}"]`);
  }
  const statuses = await page.$$eval("#agents-table tbody tr", (rows) => rows.map((r) => [r.dataset.agent, r.children[1].textContent]));
  for (const id of agents) {
    const row = statuses.find(([a]) => a === id);
    if (!row || row[1] !== "alive") throw new Error(`agent ${id} not alive in the table: ${JSON.stringify(statuses)}`);
  }
  await page.click(`#agents-table tr[data-agent="${agents[0]}"] details summary`);
  await page.screenshot({ path: join(shots, "02-agents.png"), fullPage: true });
  step(`agents table lists ${agents.join(", ")} as alive`);

  // 3. Live flow: send a message now and watch it go by.
  await page.click('.tabs button[data-tab="flow"]');
  await page.waitForFunction(() => document.querySelector("#live-status").textContent === "live");
  const liveID = "live-" + Date.now();
  const res = await fetch(base + "/atp/send", {
    method: "POST",
    headers: { "Authorization": "Bearer " + token, "Content-Type": "application/json" },
    body: JSON.stringify({ atp_version: "1.0", message_id: liveID, sender: env("LIVE_SENDER"), receiver: env("LIVE_RECEIVER"),
      type: "task", ttl_ms: 30000, payload: { text: "watch me" } }),
  });
  if (res.status >= 300) throw new Error("live send: " + res.status + " " + await res.text());
  await page.waitForSelector(`#flow-table tr[data-msg="${liveID}"][data-type="accepted"]`);
  await page.waitForSelector(`#flow-table tr[data-msg="${liveID}"][data-type="delivered"]`);
  step("live flow shows the message accepted and delivered");
  // The protocol filter hides other protocols' events.
  await page.selectOption("#f-proto", "mamp");
  const before = await page.$$eval("#flow-table tbody tr", (r) => r.length);
  const res2 = await fetch(base + "/atp/send?wait_ms=5000", {
    method: "POST",
    headers: { "Authorization": "Bearer " + token, "Content-Type": "application/json" },
    body: JSON.stringify({ atp_version: "1.0", message_id: liveID + "-filtered", sender: env("LIVE_SENDER"), receiver: env("LIVE_RECEIVER"),
      type: "task", ttl_ms: 30000, payload: { text: "filtered out" } }),
  });
  if (res2.status >= 300) throw new Error("filtered send: " + res2.status);
  await page.waitForTimeout(500);
  if (await page.$(`#flow-table tr[data-msg="${liveID}-filtered"]`)) throw new Error("an ATP event passed the mamp filter");
  if ((await page.$$eval("#flow-table tbody tr", (r) => r.length)) !== before) throw new Error("rows were added under the mamp filter");
  await page.selectOption("#f-proto", "");
  step("protocol filter hides other protocols");
  await page.screenshot({ path: join(shots, "03-live-flow.png"), fullPage: true });

  // 4. Conversation with an image part.
  await page.click('.tabs button[data-tab="conversations"]');
  await page.click(`#conv-list li[data-conv="${conversation}"]`);
  const img = await page.waitForSelector("#conv-view .part.image img");
  await page.waitForFunction((el) => el.complete && el.naturalWidth > 0, img);
  const dims = await img.evaluate((el) => [el.naturalWidth, el.naturalHeight, el.src.slice(0, 22)]);
  if (dims[2] !== "data:image/png;base64,") throw new Error("image source: " + dims[2]);
  await page.waitForSelector("#conv-view .part.text");
  await page.waitForSelector("#conv-view .part.code pre");
  await page.screenshot({ path: join(shots, "04-conversation.png"), fullPage: true });
  step(`conversation ${conversation} renders text, code and a ${dims[0]}x${dims[1]} image`);

  // 5. Receipt from a message link.
  await page.click(`#conv-view .msgbox a.msg`);
  await page.waitForSelector("#receipt-card");
  const status = await page.$eval("#receipt-card", (el) => el.dataset.status);
  step("receipt opens from the conversation (status " + status + ")");

  // 6. Dead letter replay.
  await page.click('.tabs button[data-tab="dlq"]');
  await page.waitForSelector(`#dlq-table tr[data-msg="${deadLetter}"]`);
  await page.screenshot({ path: join(shots, "05-dead-letters.png"), fullPage: true });
  await page.click(`button[data-replay="${deadLetter}"]`);
  await page.waitForFunction(() => document.querySelector("#dlq-note").textContent.startsWith("Replayed"));
  await page.waitForSelector(`#dlq-table tr[data-msg="${deadLetter}"]`, { state: "detached" });
  await page.screenshot({ path: join(shots, "06-replayed.png"), fullPage: true });
  step(`dead letter ${deadLetter} replayed and left the list`);
  await page.click('.tabs button[data-tab="flow"]');
  await page.waitForSelector(`#flow-table tr[data-msg="${deadLetter}"][data-type="replayed"]`);
  await page.waitForSelector(`#flow-table tr[data-msg="${deadLetter}"][data-type="delivered"]`);
  step("the replayed message is delivered (seen live)");

  // 7. AMP sessions: tick the session a few more times while the page is
  // open, refreshing between ticks, so its pressure line has several points.
  await page.click('.tabs button[data-tab="amp"]');
  await page.waitForSelector(`#amp-table tr[data-session="${ampSession}"] svg.spark path`, { state: "attached" });
  for (let i = 0; i < 4; i++) {
    const t = await fetch(base + "/v4/tick", {
      method: "POST",
      headers: { "Authorization": "Bearer " + token, "Content-Type": "application/json" },
      body: JSON.stringify({ session_id: ampSession, event: "PostToolUse", tool_name: "Bash",
        tool_result: { exit_code: 1, stderr: "still failing" }, success: false }),
    });
    if (t.status !== 200) throw new Error("tick: " + t.status + " " + await t.text());
    await page.click("#amp-refresh");
    await page.waitForFunction(([s, n]) => {
      const p = document.querySelector(`#amp-table tr[data-session="${s}"] svg.spark path`);
      return p && (p.getAttribute("d").match(/H/g) || []).length >= n;
    }, [ampSession, i + 1]);
  }
  const pressure = await page.$eval(`#amp-table tr[data-session="${ampSession}"] td:nth-child(3)`, (el) => el.textContent);
  await page.screenshot({ path: join(shots, "07-amp-sessions.png"), fullPage: true });
  step(`AMP session ${ampSession} shows its pressure over time (now ${pressure})`);

  // Back to the overview for the reference picture.
  await page.click('.tabs button[data-tab="flow"]');
  await page.screenshot({ path: join(shots, "dashboard.png") });

  const csp = problems.filter((p) => /Content Security Policy|Refused to/i.test(p));
  if (problems.length) throw new Error("browser reported problems:\n" + problems.join("\n") + (csp.length ? "\n(CSP violations above)" : ""));
  step("no console errors, no CSP violations, no off-hub requests");
  console.log("dashboard e2e: OK");
} catch (e) {
  console.error("dashboard e2e: FAIL: " + (e && e.stack || e));
  if (problems.length) console.error(problems.join("\n"));
  try { await context.pages()[0].screenshot({ path: join(shots, "failure.png"), fullPage: true }); } catch {}
  exitCode = 1;
} finally {
  await context.close();
  rmSync(userDataDir, { recursive: true, force: true });
}
process.exit(exitCode);
