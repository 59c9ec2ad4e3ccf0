// Sign-in test of the taskledger page, in headless Debian Chromium driven by
// playwright-core, against a local OpenID Connect issuer from npm
// (oauth2-mock-server: discovery, JWKS, authorize + token endpoints with
// PKCE S256 and nonce; it signs every request in without a login form).
//
//   node web/test/signin.mjs <screenshot dir>
//
// Handshake with the Go test (web/browser_test.go, TestBrowserSignIn):
//   1. this script starts the issuer on 127.0.0.1 (a free port) and prints
//      {"issuer": URL, "client_id": ID} as its first stdout line;
//   2. the Go test starts the local stack with its JWT authorizer pointed at
//      that issuer and audience, and writes the stack's URL as one stdin line;
//   3. this script drives the page and prints the JSON report as its last
//      stdout line (same shape as browser.mjs), exiting 0 only when every
//      step passed. The issuer stops with the script.
import { chromium } from 'playwright-core';
import { OAuth2Server } from 'oauth2-mock-server';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CHROMIUM, ARGS, STEP_TIMEOUT, createRun, run, mkdir, issuerHandshake } from './harness.mjs';

const CLIENT_ID = 'taskledger-page';
const OVERALL_TIMEOUT = 170_000;

const [, , shotDirArg] = process.argv;
if (!shotDirArg) {
  console.error('usage: node signin.mjs <screenshot dir>  (stack URL on stdin)');
  process.exit(2);
}
const { report, log, step, check, shot, shotDir } = createRun('signin', shotDirArg);
let page;

// The issuer: who signs in next is chosen by the test (the mock has no
// login form).
const issuerServer = new OAuth2Server();
let nextUser = { sub: 'alice', email: 'alice@example.com' };
issuerServer.service.on('beforeTokenSigning', (token) => {
  token.payload.sub = nextUser.sub;
  if (token.payload.aud === CLIENT_ID) token.payload.email = nextUser.email;
});

// Flow requests seen by the browser: the authorize and token requests.
function trackFlow(ctx, issuer) {
  const seen = { authorize: [], token: [], apiAuth: [] };
  ctx.on('request', (req) => {
    const u = new URL(req.url());
    if (u.origin === issuer && u.pathname === '/authorize') seen.authorize.push(Object.fromEntries(u.searchParams));
    if (u.origin === issuer && u.pathname === '/token' && req.method() === 'POST') seen.token.push(Object.fromEntries(new URLSearchParams(req.postData() || '')));
    if (u.pathname.startsWith('/tasks')) seen.apiAuth.push({ method: req.method(), path: u.pathname, auth: req.headers()['authorization'] || '' });
  });
  return seen;
}

// openContext is harness.mjs's launch for a page that may load several
// origins (the stack and the issuer).
async function openContext(userDataDir, allowed) {
  const ctx = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM, headless: true, args: ARGS, viewport: { width: 1280, height: 900 }, timeout: 60_000,
  });
  const foreign = [];
  await ctx.route('**/*', (route) => {
    const u = route.request().url();
    if (allowed.some((o) => u.startsWith(o + '/')) || u.startsWith('data:')) return route.continue();
    foreign.push(u);
    return route.abort();
  });
  const p = ctx.pages()[0] || await ctx.newPage();
  p.setDefaultTimeout(STEP_TIMEOUT);
  p.on('pageerror', (e) => report.errors.push('pageerror: ' + e.message));
  p.on('console', (m) => { if (m.type() === 'error') report.errors.push('console: ' + m.text()); });
  return { ctx, page: p, foreign };
}

async function signIn(p, stackURL, who) {
  await p.goto(stackURL, { waitUntil: 'load' });
  await p.waitForSelector('html[data-ready="true"][data-auth="signed-out"]');
  await p.waitForSelector('#sign-in:not([hidden])');
  await Promise.all([
    p.waitForURL((u) => u.searchParams.has('code'), { waitUntil: 'commit' }),
    p.click('#sign-in'),
  ]);
  await p.waitForSelector('html[data-ready="true"][data-auth="signed-in"]');
  const user = (await p.textContent('#auth-user')).trim();
  check(user.includes(who), `the page shows who is signed in (got "${user}")`);
  return user;
}

const storedSession = (p, base) => p.evaluate((b) => JSON.parse(sessionStorage.getItem('taskledger.auth:' + b) || 'null'), base);

async function main() {
  const { issuer, stackURL, origin } = await issuerHandshake(issuerServer, CLIENT_ID);
  log('stack', origin, 'issuer', issuer);

  await mkdir(shotDir, { recursive: true });
  const dirs = [await mkdtemp(join(tmpdir(), 'taskledger-chromium-')), await mkdtemp(join(tmpdir(), 'taskledger-chromium-'))];
  const contexts = [];
  try {
    const alice = await openContext(dirs[0], [origin, issuer]);
    contexts.push(alice.ctx);
    page = alice.page;
    const flow = trackFlow(alice.ctx, issuer);
    let apiFrom = 0; // API calls from the sign-in on

    await step('the API refuses requests without a valid token (401, API Gateway shape)', async () => {
      const out = {};
      const expired = await issuerServer.issuer.buildToken({ expiresIn: -120, scopesOrTransform: (_h, pl) => { pl.sub = 'alice'; pl.aud = CLIENT_ID; } });
      const wrongAud = await issuerServer.issuer.buildToken({ scopesOrTransform: (_h, pl) => { pl.sub = 'alice'; pl.aud = 'another-client'; } });
      for (const [name, auth] of [['none', ''], ['garbage', 'Bearer garbage.not.ajwt'], ['expired', 'Bearer ' + expired], ['wrong audience', 'Bearer ' + wrongAud]]) {
        const r = await fetch(origin + '/tasks', {
          method: 'POST', headers: { 'Content-Type': 'application/json', 'Idempotency-Key': 'unauth-' + name, ...(auth ? { Authorization: auth } : {}) },
          body: JSON.stringify({ kind: 'generate', input: { prompt: 'must not be recorded' } }),
        });
        const body = await r.text();
        check(r.status === 401, `${name}: 401 (got ${r.status})`);
        check(body === '{"message":"Unauthorized"}', `${name}: API Gateway's body (got ${body})`);
        out[name] = r.status;
      }
      const cfg = await (await fetch(origin + '/auth/config')).json();
      check(cfg.auth_mode === 'jwt' && cfg.issuer === issuer && cfg.client_id === CLIENT_ID, '/auth/config names the issuer: ' + JSON.stringify(cfg));
      return out;
    });

    await step('the page shows "Sign in" and no open-API banner', async () => {
      await page.goto(stackURL, { waitUntil: 'load' });
      await page.waitForSelector('html[data-ready="true"][data-auth="signed-out"]');
      check(await page.isVisible('#sign-in'), 'Sign in button visible');
      check(/sign in/i.test(await page.textContent('#sign-in')), 'the button says Sign in');
      check(await page.isHidden('#open-banner'), 'no "open to anyone" banner in jwt mode');
      // Sending before signing in: the API's 401, and the page says to sign in.
      await page.fill('#prompt', 'Not signed in yet.');
      await page.click('#send');
      await page.waitForSelector('#submit-status[data-status="401"]');
      await page.waitForSelector('#auth-status:not([hidden])');
      const said = (await page.textContent('#auth-status')).trim();
      check(/sign in/i.test(said), 'the page asks to sign in: ' + said);
      check(await page.getAttribute('html', 'data-auth') === 'signed-out', 'still signed out (no redirect without a session)');
      await page.fill('#prompt', '');
      await shot(page, '10-signed-out.png');
      return { said };
    });

    await step('a forged callback (unknown state) is refused', async () => {
      const tokenCalls = flow.token.length;
      await page.goto(stackURL.replace(/\/?$/, '/') + '?code=forged&state=forged', { waitUntil: 'load' });
      await page.waitForSelector('html[data-ready="true"][data-auth="signed-out"]');
      const said = (await page.textContent('#auth-status')).trim();
      check(/state/.test(said), 'the page names the state mismatch: ' + said);
      check(flow.token.length === tokenCalls, 'no code exchange for a forged callback');
      check(!new URL(page.url()).search, 'the forged code left the address bar');
      return { said };
    });

    await step('sign in: authorization code + PKCE S256, state and nonce, no client secret', async () => {
      apiFrom = flow.apiAuth.length;
      const user = await signIn(page, stackURL, 'alice@example.com');
      check(flow.authorize.length === 1, `one authorization request (got ${flow.authorize.length})`);
      const a = flow.authorize[0];
      check(a.response_type === 'code' && a.code_challenge_method === 'S256', 'code flow with S256');
      check(/^[A-Za-z0-9_-]{43}$/.test(a.code_challenge), 'a SHA-256 code challenge');
      check(a.state && a.nonce && a.client_id === CLIENT_ID && a.redirect_uri === origin + '/', 'state, nonce, client id, redirect uri: ' + JSON.stringify(a));
      check(flow.token.length === 1, 'one token request');
      const t = flow.token[0];
      check(t.grant_type === 'authorization_code' && /^[A-Za-z0-9_-]{43}$/.test(t.code_verifier), 'code exchanged with the PKCE verifier');
      check(!('client_secret' in t), 'no client secret');
      check(!new URL(page.url()).search, 'code and state are gone from the address bar: ' + page.url());
      const sess = await storedSession(page, origin);
      check(sess && sess.sub === 'alice' && sess.bearer, 'tokens kept in sessionStorage');
      const inLocal = await page.evaluate(() => Object.keys(localStorage).filter((k) => /eyJ/.test(localStorage.getItem(k) || '')));
      check(inLocal.length === 0, 'no token in localStorage');
      return { user, scope: a.scope };
    });

    await step('signed in, submit a task and see it complete', async () => {
      await page.fill('#prompt', 'Signed-in hello.');
      await page.click('#send');
      await page.waitForSelector('#submit-status[data-status="202"]');
      const id = await page.getAttribute('#submit-status', 'data-task-id');
      await page.waitForSelector(`#task-view[data-task-id="${id}"][data-state="completed"]`);
      const mine = flow.apiAuth.slice(apiFrom);
      const posts = mine.filter((r) => r.method === 'POST' && r.path === '/tasks');
      check(posts.length >= 1 && posts.every((r) => /^Bearer eyJ/.test(r.auth)), 'every POST /tasks carries a bearer JWT');
      check(mine.every((r) => /^Bearer /.test(r.auth)), 'every API call after sign-in carries the bearer');
      report.tasks.alice = id;
      await shot(page, '11-signed-in-completed.png');
      return { taskID: id, apiCalls: flow.apiAuth.length };
    });

    await step('a second user cannot see the first user\'s task (404)', async () => {
      nextUser = { sub: 'bob', email: 'bob@example.com' };
      const bob = await openContext(dirs[1], [origin, issuer]);
      contexts.push(bob.ctx);
      await signIn(bob.page, stackURL, 'bob@example.com');
      const id = report.tasks.alice;
      const status = await bob.page.evaluate(async ([b, tid]) => {
        const s = JSON.parse(sessionStorage.getItem('taskledger.auth:' + b));
        const r = await fetch(b + '/tasks/' + encodeURIComponent(tid), { headers: { Authorization: 'Bearer ' + s.bearer } });
        return r.status;
      }, [origin, id]);
      check(status === 404, `bob reading alice's task: 404 (got ${status})`);
      // In the page: bob's task list is his own (empty).
      check((await bob.page.$$('#task-list li[data-task-id]')).length === 0, 'bob\'s task list is empty');
      // bob's own submission is recorded under his scope (checked in Go).
      await bob.page.fill('#prompt', 'Bob\'s own task.');
      await bob.page.click('#send');
      await bob.page.waitForSelector('#submit-status[data-status="202"]');
      report.tasks.bob = await bob.page.getAttribute('#submit-status', 'data-task-id');
      await shot(bob.page, '12-second-user.png');
      check(bob.foreign.length === 0, 'bob: foreign requests: ' + bob.foreign.join(', '));
      return { status, bobTask: report.tasks.bob };
    });

    await step('an expired token: the 401 sends the user to sign in again', async () => {
      nextUser = { sub: 'alice', email: 'alice@example.com' };
      const expired = await issuerServer.issuer.buildToken({ expiresIn: -120, scopesOrTransform: (_h, pl) => { pl.sub = 'alice'; pl.aud = CLIENT_ID; } });
      // The stored session says it is still good (clock skew, a revoked
      // key…); only the API knows better.
      await page.evaluate(([b, tok]) => {
        const s = JSON.parse(sessionStorage.getItem('taskledger.auth:' + b));
        s.bearer = tok; s.expires_at = Date.now() + 3600_000; s.at = 0;
        sessionStorage.setItem('taskledger.auth:' + b, JSON.stringify(s));
      }, [origin, expired]);
      const before = flow.authorize.length;
      await page.reload({ waitUntil: 'load' });
      await page.waitForSelector('html[data-ready="true"][data-auth="signed-in"]');
      // Opening the task calls the API with the expired token: 401, then
      // the page goes to the issuer and comes back with a new code.
      await Promise.all([
        page.waitForRequest((req) => req.url() === issuer + '/token' && req.method() === 'POST'),
        page.click(`#task-list li[data-task-id="${report.tasks.alice}"] button`),
      ]);
      await page.waitForSelector('html[data-ready="true"][data-auth="signed-in"]');
      check(flow.authorize.length === before + 1, 'a new authorization request after the 401');
      const sess = await storedSession(page, origin);
      check(sess.bearer !== expired && sess.sub === 'alice', 'a fresh token replaced the expired one');
      await page.click(`#task-list li[data-task-id="${report.tasks.alice}"] button`);
      await page.waitForSelector(`#task-view[data-task-id="${report.tasks.alice}"][data-state="completed"]`);
      return { reauthorized: true };
    });

    await step('sign out', async () => {
      await page.click('#sign-out');
      await page.waitForSelector('html[data-auth="signed-out"]');
      check(await page.isVisible('#sign-in'), 'Sign in offered again');
      check(await storedSession(page, origin) === null, 'the session is gone from sessionStorage');
      check(await page.isHidden('#task-view'), 'the task view is closed');
      await shot(page, '13-signed-out-again.png');
    });

    await step('no page errors and no foreign network loads', async () => {
      const pageErrors = report.errors.filter((e) => e.startsWith('pageerror'));
      check(pageErrors.length === 0, 'page errors: ' + pageErrors.join('; '));
      const csp = report.errors.filter((e) => /Content Security Policy/i.test(e));
      check(csp.length === 0, 'CSP violations: ' + csp.join('; '));
      check(alice.foreign.length === 0, 'foreign requests: ' + alice.foreign.join(', '));
    });
    report.ok = true;
  } catch (err) {
    if (page) await shot(page, 'signin-failure.png').catch(() => {});
    throw err;
  } finally {
    for (const c of contexts) await c.close().catch(() => {});
    for (const d of dirs) await rm(d, { recursive: true, force: true }).catch(() => {});
    await issuerServer.stop().catch(() => {});
  }
}

run(report, log, OVERALL_TIMEOUT, main);
