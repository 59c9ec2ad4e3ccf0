// Sign-in loop test of the taskledger page, in headless Debian Chromium
// driven by playwright-core, against a local OpenID Connect issuer from npm
// (oauth2-mock-server, which signs every request in without a login form,
// as an issuer with a live SSO session does).
//
//   node web/test/signinloop.mjs <screenshot dir>
//
// Handshake with the Go test (web/signinloop_browser_test.go): this script
// starts the issuer and prints {"issuer", "client_id"} as its first stdout
// line; the Go test starts the local stack with its JWT authorizer's
// audience set to ANOTHER client, so that the API refuses (401) every token
// the page gets, and writes the stack's URL as one stdin line; this script
// drives the page and prints the JSON report as its last stdout line.
//
// What it asserts: once the page has said that the API refuses a token it
// has never accepted (a misconfigured API, L.unauthorizedAction
// "misconfigured"), it never sends the browser to the issuer again by
// itself, however long the tab stays open. A verdict that lapsed with a
// time window would let a later background poll redirect; the issuer
// answers at once, the new load's fresh token is refused, and so on — a
// sign-in loop a per-page-load counter cannot see, because every turn is a
// new page load.
import { chromium } from 'playwright-core';
import { OAuth2Server } from 'oauth2-mock-server';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CHROMIUM, ARGS, STEP_TIMEOUT, createRun, run, mkdir, issuerHandshake } from './harness.mjs';

const CLIENT_ID = 'taskledger-page';
const OVERALL_TIMEOUT = 150_000;
// Longer than any "issued moments ago" window a page might use (15 s)
// plus a background poll (3 s) and slack: a loop shows within it.
const WATCH_MS = 25_000;

const [, , shotDirArg] = process.argv;
if (!shotDirArg) {
  console.error('usage: node signinloop.mjs <screenshot dir>  (stack URL on stdin)');
  process.exit(2);
}
const { report, log, step, check, shot, shotDir } = createRun('signinloop', shotDirArg);
let page;

const issuerServer = new OAuth2Server();
issuerServer.service.on('beforeTokenSigning', (token) => {
  token.payload.sub = 'alice';
  if (token.payload.aud === CLIENT_ID) token.payload.email = 'alice@example.com';
});

async function main() {
  const { issuer, stackURL, origin } = await issuerHandshake(issuerServer, CLIENT_ID);
  log('stack', origin, 'issuer', issuer);

  await mkdir(shotDir, { recursive: true });
  const dir = await mkdtemp(join(tmpdir(), 'taskledger-chromium-'));
  let ctx;
  try {
    ctx = await chromium.launchPersistentContext(dir, {
      executablePath: CHROMIUM, headless: true, args: ARGS, viewport: { width: 1280, height: 900 }, timeout: 60_000,
    });
    const foreign = [];
    await ctx.route('**/*', (route) => {
      const u = route.request().url();
      if (u.startsWith(origin + '/') || u.startsWith(issuer + '/') || u.startsWith('data:')) return route.continue();
      foreign.push(u);
      return route.abort();
    });
    const authorize = [];
    const refused = [];
    ctx.on('request', (req) => {
      const u = new URL(req.url());
      if (u.origin === issuer && u.pathname === '/authorize') authorize.push(Date.now());
    });
    ctx.on('response', (resp) => {
      const u = new URL(resp.url());
      if (u.origin === origin && u.pathname.startsWith('/tasks') && resp.status() === 401) refused.push(Date.now());
    });
    page = ctx.pages()[0] || await ctx.newPage();
    page.setDefaultTimeout(STEP_TIMEOUT);
    page.on('pageerror', (e) => report.errors.push('pageerror: ' + e.message));

    await step('sign in (one click) to an API that refuses every token', async () => {
      await page.goto(stackURL, { waitUntil: 'load' });
      await page.waitForSelector('html[data-ready="true"][data-auth="signed-out"]');
      // alice's task list from earlier in this tab, as the page keeps it
      // (ids and states only): a task still running, which the page polls
      // in the background.
      await page.evaluate((o) => sessionStorage.setItem('taskledger.tasks:' + o + '|alice',
        JSON.stringify([{ task_id: 'tsk_still_running', state: 'running', parent_task_id: '', created_at: '' }])), origin);
      await Promise.all([
        page.waitForURL((u) => u.searchParams.has('code'), { waitUntil: 'commit' }),
        page.click('#sign-in'),
      ]);
      await page.waitForSelector('html[data-ready="true"][data-auth="signed-in"]');
      check(authorize.length === 1, `one authorization request for the click (got ${authorize.length})`);
      return { authorize: authorize.length };
    });

    await step('the page says the API refuses a fresh token', async () => {
      await page.waitForFunction(() => /never accepted/.test(document.getElementById('auth-status').textContent || ''));
      const said = (await page.textContent('#auth-status')).trim();
      check(refused.length >= 1, 'the API answered 401');
      await shot(page, '30-misconfigured.png');
      return { said };
    });

    await step('and then never sends the browser to the issuer by itself (no sign-in loop)', async () => {
      const t0 = Date.now();
      const before = authorize.length;
      let loopedAt = 0;
      try {
        await page.waitForRequest((req) => req.url().startsWith(issuer + '/authorize'), { timeout: WATCH_MS });
        loopedAt = Date.now() - t0;
      } catch (e) {
        if (!/Timeout/i.test(String(e && e.message))) throw e;
      }
      // Let a redirect in flight land, to count it.
      await page.waitForLoadState('load').catch(() => {});
      check(!loopedAt && authorize.length === before,
        `the page sent the browser to the issuer again ${loopedAt} ms after saying the API is misconfigured, without a click ` +
        `(${authorize.length} authorization requests in all, ${refused.length} refused API calls)`);
      check(foreign.length === 0, 'foreign requests: ' + foreign.join(', '));
      return { authorize: authorize.length, refused: refused.length };
    });
    report.ok = true;
  } catch (err) {
    if (page) await shot(page, 'signinloop-failure.png').catch(() => {});
    throw err;
  } finally {
    if (ctx) await ctx.close().catch(() => {});
    await rm(dir, { recursive: true, force: true }).catch(() => {});
    await issuerServer.stop().catch(() => {});
  }
}

run(report, log, OVERALL_TIMEOUT, main);
