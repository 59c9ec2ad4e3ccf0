// Shared harness of the page's browser tests: Debian Chromium driven by
// playwright-core (never a downloaded browser build), the one-line JSON
// report the Go tests read, steps, checks and screenshots. Used by every
// browser script (signin.mjs opens its own context: it allows two origins).
import { chromium } from 'playwright-core';
import { mkdtemp, mkdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';

export const CHROMIUM = process.env.TASKLEDGER_CHROMIUM || '/usr/bin/chromium';
export const ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic',
];
export const STEP_TIMEOUT = 60_000;

// createRun returns the report ({ok, steps, screenshots, tasks, hashes,
// errors}) and the helpers that fill it. tag prefixes progress lines on
// stderr.
export function createRun(tag, shotDirArg) {
  const shotDir = resolve(shotDirArg);
  const report = { ok: false, steps: [], screenshots: [], tasks: {}, hashes: {}, errors: [] };
  const log = (...a) => console.error(`[${tag}]`, ...a);
  async function step(name, fn) {
    const t0 = Date.now();
    log('step:', name);
    try {
      const detail = await fn();
      report.steps.push({ name, ok: true, ms: Date.now() - t0, detail: detail ?? null });
    } catch (err) {
      report.steps.push({ name, ok: false, ms: Date.now() - t0, detail: String(err && err.stack || err) });
      throw err;
    }
  }
  function check(cond, msg) {
    if (!cond) throw new Error('check failed: ' + msg);
  }
  async function shot(page, name) {
    const p = join(shotDir, name);
    await page.screenshot({ path: p, fullPage: true });
    report.screenshots.push(p);
    return p;
  }
  const text = async (page, sel) => ((await page.textContent(sel)) || '').replace(/\s+/g, ' ').trim();
  return { report, log, step, check, shot, text, shotDir };
}

// launch starts Chromium with a fresh profile and a page that may load
// only origin (anything else is aborted and listed in foreign); page
// errors and console errors go to report.errors, CSP violations to csp.
// opts.viewport overrides the 1280×1000 default. opts.passThrough lists
// other origins whose requests go out (a test's own recorder, which must
// see whatever the page sends it; its self-signed certificate is accepted).
export async function launch(origin, report, opts = {}) {
  const userDataDir = await mkdtemp(join(tmpdir(), 'taskledger-chromium-'));
  const foreign = [];
  const csp = [];
  const through = [origin, ...(opts.passThrough || [])];
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM, headless: true, args: ARGS,
    viewport: opts.viewport || { width: 1280, height: 1000 }, timeout: 60_000,
    ignoreHTTPSErrors: !!(opts.passThrough && opts.passThrough.length),
  });
  await context.route('**/*', (route) => {
    const u = route.request().url();
    if (through.some((o) => u.startsWith(o + '/')) || u.startsWith('data:')) return route.continue();
    foreign.push(u);
    return route.abort();
  });
  const page = context.pages()[0] || await context.newPage();
  page.setDefaultTimeout(STEP_TIMEOUT);
  page.on('pageerror', (e) => report.errors.push('pageerror: ' + e.message));
  page.on('console', (m) => {
    if (m.type() === 'error') report.errors.push('console: ' + m.text());
    if (/Content Security Policy/i.test(m.text())) csp.push(m.text());
  });
  const close = async () => {
    await context.close().catch(() => {});
    await rm(userDataDir, { recursive: true, force: true }).catch(() => {});
  };
  return { context, page, foreign, csp, close };
}

// run runs main under an overall timeout, prints the report as the last
// stdout line and exits 0 only when main set report.ok.
export function run(report, log, overallMs, main) {
  const timer = setTimeout(() => {
    report.steps.push({ name: 'overall timeout', ok: false, ms: overallMs, detail: 'gave up' });
    process.stdout.write(JSON.stringify(report) + '\n');
    process.exit(1);
  }, overallMs);
  main().catch((err) => {
    log('FAILED:', err && err.message || err);
  }).finally(() => {
    clearTimeout(timer);
    process.stdout.write(JSON.stringify(report) + '\n');
    process.exit(report.ok ? 0 : 1);
  });
}

export { mkdir };

// issuerHandshake is a sign-in script's half of the handshake with its Go
// test (web/harness_test.go runWithIssuer): it starts the oauth2-mock-server
// issuerServer on 127.0.0.1, prints {"issuer","client_id"} as the first
// stdout line, and reads the local stack's URL from stdin's first line.
export async function issuerHandshake(issuerServer, clientId) {
  await issuerServer.issuer.keys.generate('RS256');
  await issuerServer.start(0, '127.0.0.1');
  const issuer = `http://127.0.0.1:${issuerServer.address().port}`;
  issuerServer.issuer.url = issuer;
  process.stdout.write(JSON.stringify({ issuer, client_id: clientId }) + '\n');

  const rl = createInterface({ input: process.stdin });
  const stackURL = (await new Promise((res) => rl.once('line', res))).trim();
  rl.close();
  return { issuer, stackURL, origin: new URL(stackURL).origin };
}

// streamGate is a script's half of its Go test's stream gate
// (web/gate_test.go): allow(prompt, words) lets the simulated provider
// stream the first `words` words of replies to prompt (-1: all; a prompt
// never named streams freely) and resolves once the test has set it. A
// reply held at a word stays there, the task running, until the script
// allows more (or stops the task): a check that the page shows a reply
// growing, or offers Stop while it runs, does not race the provider.
export function streamGate() {
  const rl = createInterface({ input: process.stdin });
  const waiting = [];
  rl.on('line', (l) => { const w = waiting.shift(); if (w) w(l.trim()); });
  rl.on('close', () => { while (waiting.length) waiting.shift()('stdin closed'); });
  return async function allow(prompt, words) {
    const answer = new Promise((res) => waiting.push(res));
    process.stdout.write(JSON.stringify({ gate: { prompt, allow: words } }) + '\n');
    const got = await answer;
    if (got !== 'ok') throw new Error('stream gate: ' + got);
  };
}
