// Drives the Switchboard dashboard in Debian's headless Chromium through
// playwright-core. Run by dashboard_test.go, which starts a hub with auth
// on, fills it with agents, messages and a dead letter, and passes what to
// expect in the environment:
//
//   BASE_URL, ADMIN_TOKEN, CHROMIUM, SCREENSHOTS,
//   EXPECT_AGENTS (comma separated), EXPECT_CONVERSATION, EXPECT_DEAD_LETTER,
//   LIVE_SENDER, LIVE_RECEIVER (an ATP pair the script sends through while
//   it watches the live flow), EXPECT_AMP_SESSION, HISTORY_AGENT (a pull
//   agent holding HISTORY_COUNT queued messages, one with HISTORY_NEEDLE in
//   its text), EXPECT_ACCEPTED (the messages the hub before this one
//   accepted: the charts must show them, read from the store).
//
// It checks what a person sees — the text of each view, not only that
// elements exist — and takes a screenshot of each.
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
const historyAgent = env("HISTORY_AGENT");
const historyCount = Number(env("HISTORY_COUNT"));
const needle = env("HISTORY_NEEDLE");
const expectAccepted = Number(env("EXPECT_ACCEPTED"));
const visibleText = (page, sel) => page.$eval(sel, (el) => el.innerText);
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
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: base });
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

  // 2. Overview: the charts draw the flow over time from the store. The
  // messages were sent to the hub before a restart, so this hub process
  // never saw them go by: what the charts show is stored history.
  await page.waitForSelector("#tab-overview:not([hidden]) #chart-throughput svg path.series");
  const legendNumber = (id, re) => page.$eval(id + " .legend", (e, src) => {
    const m = e.textContent.match(new RegExp(src));
    return m ? Number(m[1]) : -1;
  }, re.source);
  const charts = async () => ({
    accepted: await legendNumber("#chart-throughput", /accepted (\d+) in/),
    delivered: await legendNumber("#chart-throughput", /delivered (\d+) in/),
    queued: await legendNumber("#chart-queue", /queued (\d+) now/),
    dead: await legendNumber("#chart-dead", /new dead letters (\d+) in/),
  });
  await page.waitForFunction((n) => /queued \d+ now/.test(document.querySelector("#chart-queue .legend").textContent), 0);
  let seen = await charts();
  if (seen.accepted < expectAccepted || seen.queued < historyCount || seen.dead < 1 || seen.delivered < 1) {
    throw new Error(`after the restart the charts show ${JSON.stringify(seen)}; want at least ${expectAccepted} accepted, ` +
      `${historyCount} queued, 1 dead letter and 1 delivered`);
  }
  // What a screen reader reads says the same.
  const aria = await page.$eval("#chart-queue svg", (s) => s.getAttribute("aria-label"));
  if (!aria.includes("Queue depth: queued " + seen.queued + " now")) throw new Error("queue chart's aria-label: " + aria);
  const throughputAria = await page.$eval("#chart-throughput svg", (s) => s.getAttribute("aria-label"));
  if (!throughputAria.includes("accepted " + seen.accepted + " in 1h")) throw new Error("throughput chart's aria-label: " + throughputAria);
  // A narrower window: finer buckets, the same messages.
  await page.selectOption("#stats-window", "15m");
  await page.waitForFunction(() => document.querySelector("#stats-note").textContent.startsWith("Buckets of 10 s"));
  await page.waitForFunction(() => / in 15m/.test(document.querySelector("#chart-throughput .legend").textContent));
  const narrow = await charts();
  if (narrow.accepted < expectAccepted || narrow.queued !== seen.queued) throw new Error(`15m window: ${JSON.stringify(narrow)}, 1h window: ${JSON.stringify(seen)}`);
  step(`charts after a restart, from the store: ${seen.accepted} accepted, ${seen.delivered} delivered, ${seen.queued} queued, ${seen.dead} dead`);
  for (const [id, words] of [["#chart-throughput", ["Throughput", "accepted", "delivered", "/s"]], ["#chart-queue", ["Queue depth", "queued"]],
    ["#chart-dead", ["Dead letters", "new dead letters"]]]) {
    const text = await visibleText(page, id);
    for (const w of words) if (!text.includes(w)) throw new Error(`chart ${id} does not show "${w}": ${text}`);
    const paths = await page.$$eval(id + " svg path.series", (ps) => ps.map((p) => p.getAttribute("d")));
    if (!paths.length || paths.some((d) => !/^M[\d.]+ [\d.]+/.test(d))) throw new Error(`chart ${id} has no line: ${paths}`);
  }
  await page.screenshot({ path: join(shots, "02-overview.png"), fullPage: true });
  await page.selectOption("#stats-window", "1h");
  step("overview charts of throughput, queue depth and dead letters, with the queued messages counted");

  // 2b. Agents table.
  await page.click('.tabs button[data-tab="agents"]');
  for (const id of agents) {
    await page.waitForSelector(`#agents-table tr[data-agent="${id}"]`);
  }
  const statuses = await page.$$eval("#agents-table tbody tr", (rows) => rows.map((r) => [r.dataset.agent, r.children[1].textContent]));
  for (const id of agents) {
    const row = statuses.find(([a]) => a === id);
    if (!row || row[1] !== "alive") throw new Error(`agent ${id} not alive in the table: ${JSON.stringify(statuses)}`);
  }
  await page.click(`#agents-table tr[data-agent="${agents[0]}"] details summary`);
  await page.screenshot({ path: join(shots, "03-agents.png"), fullPage: true });
  step(`agents table lists ${agents.join(", ")} as alive`);

  // 2c. An agent's own page, from its link.
  await page.click(`#agents-table a[data-agent-link="${historyAgent}"]`);
  await page.waitForSelector("#tab-agent:not([hidden]) #agent-facts");
  if (!page.url().endsWith("#agent/" + historyAgent)) throw new Error("agent page address: " + page.url());
  const facts = await visibleText(page, "#agent-facts");
  if (!facts.includes("Queued\n" + historyCount) && !facts.includes("Queued\t" + historyCount) && !new RegExp("Queued\\s+" + historyCount).test(facts)) {
    throw new Error(`agent page facts do not show ${historyCount} queued: ${facts}`);
  }
  const title = (await visibleText(page, "#agent-title")).trim();
  if (title !== historyAgent) throw new Error(`agent page title reads "${title}", want "${historyAgent}"`);
  const pageText = await visibleText(page, "#tab-agent");
  if (/\b(null|undefined|NaN)\b|\[object /.test(pageText)) throw new Error("the agent page shows a programming artefact:\n" + pageText);
  const agentRows = await page.$$eval("#agent-messages tbody tr", (rs) => rs.length);
  if (agentRows < 1) throw new Error("the agent page lists no messages");
  await page.screenshot({ path: join(shots, "04-agent-page.png"), fullPage: true });
  step(`agent page of ${historyAgent}: ${historyCount} queued, ${agentRows} latest messages`);

  // 2d. History: search, filters and pages over the stored messages.
  await page.click('.tabs button[data-tab="history"]');
  await page.waitForSelector("#history-table tbody tr");
  await page.fill("#h-agent", historyAgent);
  await page.click("#h-search");
  await page.waitForFunction(() => document.querySelector("#h-page").textContent.startsWith("page 1 · 25 "));
  if (await page.isDisabled("#h-older")) throw new Error(`${historyCount} messages but no older page`);
  const firstIDs = await page.$$eval("#history-table tbody tr", (rs) => rs.map((r) => r.dataset.msg));
  await page.click("#h-older");
  await page.waitForFunction(() => document.querySelector("#h-page").textContent.startsWith("page 2"));
  const secondIDs = await page.$$eval("#history-table tbody tr", (rs) => rs.map((r) => r.dataset.msg));
  if (firstIDs.length + secondIDs.length !== historyCount || secondIDs.some((id) => firstIDs.includes(id))) {
    throw new Error(`pages: ${firstIDs.length} + ${secondIDs.length} ids (overlap?), want ${historyCount} in all`);
  }
  await page.click("#h-newer");
  await page.waitForFunction(() => document.querySelector("#h-page").textContent.startsWith("page 1"));
  await page.fill("#h-agent", "");
  await page.fill("#h-q", needle);
  await page.click("#h-search");
  await page.waitForFunction(() => document.querySelectorAll("#history-table tbody tr").length === 1);
  const found = await visibleText(page, "#history-table tbody");
  if (!found.includes(needle) || !found.includes(historyAgent)) throw new Error("search result does not show the text: " + found);
  await page.fill("#h-q", "");
  await page.selectOption("#h-status", "rejected");
  await page.click("#h-search");
  await page.waitForSelector(`#history-table tr[data-msg="${deadLetter}"]`);
  const histStatuses = await page.$$eval("#history-table tbody tr", (rs) => rs.map((r) => r.dataset.status));
  if (histStatuses.some((st) => st !== "rejected")) throw new Error("status filter let through " + histStatuses);
  if (/\b(null|undefined|NaN)\b|\[object /.test(await visibleText(page, "#tab-history"))) throw new Error("the history shows a programming artefact");
  await page.screenshot({ path: join(shots, "05-history.png"), fullPage: true });
  await page.selectOption("#h-status", "");
  step(`history: ${historyCount} messages in two pages, text search, status filter`);

  // 2e. Whole ids, and the copy button puts one on the clipboard.
  const shown = await page.$eval(`#history-table tr[data-msg="${deadLetter}"] a.msg`, (a) => a.textContent);
  if (shown !== deadLetter) throw new Error(`id shown as ${shown}, want the whole ${deadLetter}`);
  await page.click(`#history-table tr[data-msg="${deadLetter}"] button.copy`);
  await page.waitForFunction((id) => document.querySelector(`#history-table tr[data-msg="${id}"] button.copy`).textContent === "copied", deadLetter);
  const clip = await page.evaluate(() => navigator.clipboard.readText());
  if (clip !== deadLetter) throw new Error("clipboard holds " + clip);
  step("whole message ids, copied to the clipboard with one click");

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
  await page.screenshot({ path: join(shots, "08-live-flow.png"), fullPage: true });

  // 4. Conversation with an image part.
  await page.click('.tabs button[data-tab="conversations"]');
  await page.click(`#conv-list li[data-conv="${conversation}"]`);
  const img = await page.waitForSelector("#conv-view .part.image img");
  await page.waitForFunction((el) => el.complete && el.naturalWidth > 0, img);
  const dims = await img.evaluate((el) => [el.naturalWidth, el.naturalHeight, el.src.slice(0, 22)]);
  if (dims[2] !== "data:image/png;base64,") throw new Error("image source: " + dims[2]);
  await page.waitForSelector("#conv-view .part.text");
  await page.waitForSelector("#conv-view .part.code pre");
  await page.screenshot({ path: join(shots, "06-conversation.png"), fullPage: true });
  step(`conversation ${conversation} renders text, code and a ${dims[0]}x${dims[1]} image`);

  // 5. Receipt from a message link.
  await page.click(`#conv-view .msgbox a.msg`);
  await page.waitForSelector("#receipt-card");
  const status = await page.$eval("#receipt-card", (el) => el.dataset.status);
  const receiptText = await visibleText(page, "#receipt-view");
  if (/\[object /.test(receiptText)) throw new Error("the receipt view shows " + receiptText);
  for (const w of ["Message", "From → To", "Status", status, "Attempts", "History", "accepted"]) {
    if (!receiptText.includes(w)) throw new Error(`the receipt view does not show "${w}":\n${receiptText}`);
  }
  await page.screenshot({ path: join(shots, "07-receipt.png"), fullPage: true });
  step("receipt opens from the conversation and reads as text (status " + status + ")");

  // 6. Dead letter replay.
  await page.click('.tabs button[data-tab="dlq"]');
  await page.waitForSelector(`#dlq-table tr[data-msg="${deadLetter}"]`);
  const dlqText = await visibleText(page, `#dlq-table tr[data-msg="${deadLetter}"]`);
  for (const w of [deadLetter, "rejected", "422", "not today"]) {
    if (!dlqText.includes(w)) throw new Error(`the dead letter row does not show "${w}": ${dlqText}`);
  }
  await page.screenshot({ path: join(shots, "09-dead-letters.png"), fullPage: true });
  // A state-changing call without the session's CSRF token is refused.
  // (Sent with the browser's cookies, as a forged request would be.)
  const forged = (await context.request.post(base + "/dashboard/api/dlq/" + deadLetter + "/replay")).status();
  if (forged !== 403) throw new Error("replay without the CSRF token: " + forged);
  // Replay asks first; Cancel leaves it alone.
  await page.click(`button[data-replay="${deadLetter}"]`);
  await page.waitForSelector("#confirm[open]");
  const question = await visibleText(page, "#confirm");
  if (!question.includes("Replay this dead letter?") || !question.includes(deadLetter)) throw new Error("confirmation: " + question);
  await page.screenshot({ path: join(shots, "10-replay-confirm.png") });
  await page.click("#confirm-cancel");
  await page.waitForSelector("#confirm:not([open])", { state: "attached" });
  await page.click("#dlq-refresh");
  await page.waitForSelector(`#dlq-table tr[data-msg="${deadLetter}"]`);
  step("replay asks for confirmation; cancel leaves the dead letter; no CSRF token, no replay");
  await page.click(`button[data-replay="${deadLetter}"]`);
  await page.waitForSelector("#confirm[open]");
  await page.click("#confirm-ok");
  await page.waitForFunction(() => document.querySelector("#dlq-note").textContent.startsWith("Replayed"));
  await page.waitForSelector(`#dlq-table tr[data-msg="${deadLetter}"]`, { state: "detached" });
  await page.screenshot({ path: join(shots, "11-replayed.png"), fullPage: true });
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
  await page.screenshot({ path: join(shots, "12-amp-sessions.png"), fullPage: true });
  step(`AMP session ${ampSession} shows its pressure over time (now ${pressure})`);

  // Back to the overview for the reference picture.
  await page.click('.tabs button[data-tab="overview"]');
  await page.screenshot({ path: join(shots, "dashboard.png") });

  // 8. Logout ends the session on the server: the cookie the browser had
  // opens nothing any more.
  const cookies = await context.cookies(base + "/dashboard/");
  const session = cookies.find((c) => c.name === "switchboard_dashboard");
  if (!session || !session.httpOnly || session.sameSite !== "Strict") throw new Error("session cookie attributes: " + JSON.stringify(session));
  await page.click("#logout");
  await page.waitForSelector("#login:not([hidden])");
  const after = await fetch(base + "/dashboard/api/agents", { headers: { Cookie: "switchboard_dashboard=" + session.value } });
  if (after.status !== 401) throw new Error("the logged-out session cookie still opens the API: " + after.status);
  await page.reload();
  await page.waitForSelector("#login:not([hidden])");
  step("logout ends the session on the server; the old cookie gets 401");

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
