// Browser test of the Chat tab, in headless Debian Chromium driven by
// playwright-core (never a downloaded browser build).
//
//   node web/test/chat.mjs <stack URL> <screenshot dir>
//
// Against a stack whose simulated provider streams slowly: three turns of
// one conversation, each reply seen growing while its task runs and ending
// as the saved result; the conversation read back after a reload; a
// Regenerate; a Stop during a reply; a press whose automatic retries all
// fail and whose re-press reuses the key (and gets the same task back),
// while a changed message gets a new key; a document attached to the
// conversation; a reply followed by polling when the stream refuses.
// Prints one JSON report line on stdout (harness.mjs), with
// "conversation" beside the tasks.
import { createHash } from 'node:crypto';
import { createRun, launch, run, mkdir, streamGate, STEP_TIMEOUT } from './harness.mjs';

const [, , stackURL, shotDirArg] = process.argv;
if (!stackURL || !shotDirArg) {
  console.error('usage: node chat.mjs <stack URL> <screenshot dir>');
  process.exit(2);
}
const origin = new URL(stackURL).origin;
const h = createRun('chat', shotDirArg);
const { report, step, check, shotDir } = h;
const allow = streamGate();

// lastReply reads the shown reply of the last turn.
async function lastReply(page) {
  return page.evaluate(() => {
    const all = document.querySelectorAll('#chat-log li.msg-assistant');
    const li = all[all.length - 1];
    if (!li) return null;
    return {
      taskID: li.getAttribute('data-task-id'), state: li.getAttribute('data-state'),
      saved: li.getAttribute('data-saved') === 'true', streaming: li.getAttribute('data-streaming') === 'true',
      text: li.querySelector('.msg-text').textContent, meta: li.querySelector('.msg-meta').textContent,
    };
  });
}

// api reads the API as the page does (same origin, no sign-in locally).
async function api(page, path) {
  return page.evaluate(async (p) => {
    const r = await fetch(p, { headers: { Accept: 'application/json' } });
    return { status: r.status, body: await r.json() };
  }, path);
}

async function savedText(page, id) {
  const r = await api(page, '/tasks/' + id);
  check(r.status === 200 && r.body.result, `task ${id} has a saved result (${r.status} ${r.body.state})`);
  return r.body.result.text;
}

// press clicks Send with text in the box and waits for the press's outcome
// (data-status of #chat-status, set once the request is answered or given
// up on): 'network', or the HTTP status.
async function press(page, text) {
  if (text != null) await page.fill('#chat-input', text);
  await page.$eval('#chat-status', (e) => { for (const a of ['data-status', 'data-task-id', 'data-key', 'data-replayed', 'data-reused']) e.removeAttribute(a); });
  await page.click('#chat-send');
  await page.waitForFunction(() => {
    const s = document.getElementById('chat-status').getAttribute('data-status');
    return s && s !== 'sending';
  }, null, { timeout: STEP_TIMEOUT });
  return page.$eval('#chat-status', (e) => ({
    status: e.getAttribute('data-status'), taskID: e.getAttribute('data-task-id'), key: e.getAttribute('data-key'),
    replayed: e.getAttribute('data-replayed'), reused: e.getAttribute('data-reused'), text: e.textContent,
  }));
}

// growThenSave reads the last reply, whose prompt the stream gate holds at
// word 2 when it is pressed (the caller's allow): a first reading while it
// streams, then, held at word 4, a longer one that continues it; then it
// lets the rest stream, waits for the saved result and checks the shown
// text is exactly it. Every reply has more than 4 words, so neither
// reading can race the task's end.
async function growThenSave(page, taskID, prompt, shotName) {
  const streaming = (longer) => page.waitForFunction(([id, n]) => {
    const li = document.querySelector(`#chat-log li.msg-assistant[data-task-id="${id}"]`);
    return li && li.getAttribute('data-streaming') === 'true' && li.getAttribute('data-saved') !== 'true' &&
      li.querySelector('.msg-text').textContent.length > n;
  }, [taskID, longer]);
  const samples = [];
  await streaming(0);
  samples.push(await lastReply(page));
  await allow(prompt, 4);
  await streaming(samples[0].text.length);
  samples.push(await lastReply(page));
  if (shotName) await h.shot(page, shotName);
  await allow(prompt, -1);
  check(samples.every((s) => s.taskID === taskID && !s.saved && !['completed', 'failed', 'cancelled'].includes(s.state)),
    `both readings were taken while the reply ran (readings: ${JSON.stringify(samples.map((s) => [s.state, s.text.length]))})`);
  check(samples[1].text.startsWith(samples[0].text), 'the later reading continues the earlier one');
  await page.waitForSelector(`#chat-log li.msg-assistant[data-task-id="${taskID}"][data-saved="true"][data-state="completed"]`);
  const shown = (await lastReply(page)).text;
  const saved = await savedText(page, taskID);
  check(shown === saved, `the shown reply is the saved result (shown ${shown.length} chars, saved ${saved.length})`);
  check(saved.startsWith(samples[1].text), 'the saved result continues the streamed text');
  return { lengths: samples.map((s) => s.text.length), states: samples.map((s) => s.state), savedChars: saved.length };
}

run(report, h.log, 200_000, async () => {
  await mkdir(shotDir, { recursive: true });
  const b = await launch(origin, report, { viewport: { width: 1280, height: 900 } });
  const { page, foreign, csp } = b;
  // The bodies of the page's submissions, to see the history it sends.
  const posted = [];
  page.on('request', (req) => {
    if (req.method() === 'POST' && new URL(req.url()).pathname === '/tasks') posted.push({ key: req.headers()['idempotency-key'], body: req.postData() });
  });
  try {
    let conv = '';
    const turns = ['What does a ledger promise?', 'Why is a saved result the truth?', 'And what happens on a retry?'];

    await step('the Chat tab starts a conversation with a random id in the address', async () => {
      await page.goto(stackURL + '/', { waitUntil: 'load' });
      await page.waitForSelector('html[data-ready="true"]');
      await page.click('#tab-chat');
      await page.waitForSelector('#chat-view[data-conversation-id]:not([data-conversation-id=""])');
      conv = await page.getAttribute('#chat-view', 'data-conversation-id');
      check(/^[A-Za-z0-9_-]{1,128}$/.test(conv), `conversation id of the API's charset (${conv})`);
      const hash = await page.evaluate(() => location.hash);
      check(hash === '#chat=' + conv, `the address keeps the id only (${hash})`);
      report.conversation = conv;
      return { conv };
    });

    for (let i = 0; i < turns.length; i++) {
      await step(`turn ${i + 1}: the reply streams in and ends as the saved result`, async () => {
        const n = posted.length;
        await allow(turns[i], 2);
        const st = await press(page, turns[i]);
        check(st.status === '202', `202 (got ${st.status}: ${st.text})`);
        report.tasks['turn' + (i + 1)] = st.taskID;
        const body = JSON.parse(posted[n].body);
        check(body.input.conversation_id === conv, 'the submit names the conversation');
        const msgs = body.input.messages;
        check(msgs.length === 2 * i + 1 && msgs[msgs.length - 1].content === turns[i], `the conversation so far and the new turn (${msgs.length} messages)`);
        check(msgs.filter((m) => m.role === 'user').map((m) => m.content).join('|') === turns.slice(0, i + 1).join('|'), 'every user turn, in order');
        const detail = await growThenSave(page, st.taskID, turns[i], i === 1 ? 'chat-01-streaming.png' : '');
        if (i > 0) {
          const prev = await savedText(page, report.tasks['turn' + i]);
          check(msgs[msgs.length - 2].role === 'assistant' && msgs[msgs.length - 2].content === prev, 'the previous saved reply is in the history');
        }
        return { taskID: st.taskID, ...detail };
      });
    }
    await h.shot(page, 'chat-02-three-turns.png');

    await step('after a reload the conversation comes back from the API', async () => {
      const before = await page.$$eval('#chat-log .msg-text', (els) => els.map((e) => e.textContent));
      await page.reload({ waitUntil: 'load' });
      await page.waitForSelector('#chat-view[data-loaded="true"]');
      check(!(await page.isHidden('#view-chat')), 'the Chat tab is shown for #chat=<id>');
      check(await page.getAttribute('#chat-view', 'data-conversation-id') === conv, 'the same conversation');
      await page.waitForSelector('#chat-view[data-turns="3"]');
      const after = await page.$$eval('#chat-log .msg-text', (els) => els.map((e) => e.textContent));
      check(JSON.stringify(after) === JSON.stringify(before), `the same six messages (${after.length})`);
      const stored = await page.evaluate(() => JSON.stringify(sessionStorage) + JSON.stringify(localStorage));
      check(!turns.some((t) => stored.includes(t)), 'no message text in web storage');
      await page.waitForSelector(`#chat-recent li[data-conversation-id="${conv}"]`);
      return { messages: after.length };
    });

    await step('Regenerate makes a new task in the same conversation', async () => {
      const old = report.tasks.turn3;
      await page.click('#chat-regenerate');
      await page.waitForFunction((o) => {
        const id = document.getElementById('chat-status').getAttribute('data-regenerated');
        return id && id !== o;
      }, old);
      const id = await page.getAttribute('#chat-status', 'data-regenerated');
      report.tasks.regenerated = id;
      await page.waitForSelector(`#chat-log li.msg-assistant[data-task-id="${id}"][data-saved="true"]`);
      const r = await lastReply(page);
      check(r.text === await savedText(page, id), 'the new reply is its saved result');
      check(/reply 2 of 2/.test(r.meta), `the turn says which reply it shows (${r.meta})`);
      const v = (await api(page, '/tasks/' + id)).body;
      check(v.parent_task_id === old && v.conversation_id === conv, `linked to turn 3's reply in the conversation (${v.parent_task_id}, ${v.conversation_id})`);
      check(await page.getAttribute('#chat-view', 'data-turns') === '3', 'still three turns');
      return { taskID: id, parent: old };
    });

    await step('Stop during a reply cancels its task', async () => {
      // Held at word 2 and never let go: only the Stop ends this reply.
      const story = 'Tell me a long story, then stop.';
      await allow(story, 2);
      const st = await press(page, story);
      check(st.status === '202', `202 (got ${st.status})`);
      report.tasks.stopped = st.taskID;
      await page.waitForFunction((id) => {
        const li = document.querySelector(`#chat-log li.msg-assistant[data-task-id="${id}"]`);
        return li && li.getAttribute('data-streaming') === 'true' && li.getAttribute('data-state') === 'running';
      }, st.taskID);
      check(await page.isVisible('#chat-stop'), 'Stop is offered while the reply runs');
      await page.click('#chat-stop');
      await page.waitForSelector(`#chat-log li.msg-assistant[data-task-id="${st.taskID}"][data-state="cancelled"]`);
      const r = await lastReply(page);
      check(/stopped/.test(r.meta), `the reply says it stopped (${r.meta})`);
      check(!r.saved, 'no saved result');
      const v = (await api(page, '/tasks/' + st.taskID)).body;
      check(v.state === 'cancelled' && v.result == null, `the task is cancelled with no result (${v.state})`);
      check(await page.isHidden('#chat-stop') && !(await page.isDisabled('#chat-send')), 'Send is offered again');
      await h.shot(page, 'chat-03-stopped.png');
      return { taskID: st.taskID, partialChars: r.text.length };
    });

    await step('a re-press after failed retries reuses the key; a changed message gets a new one', async () => {
      // 1: every send answered 503 by the test, before the API: the press
      // gives up after its automatic retries.
      const refuse = (route) => route.request().method() !== 'POST' ? route.fallback() : route.fulfill({
        status: 503, headers: { 'Retry-After': '0', 'Content-Type': 'application/problem+json' },
        body: JSON.stringify({ type: 'about:blank', title: 'Service unavailable', status: 503, detail: 'injected by the test' }),
      });
      await page.route(origin + '/tasks', refuse);
      const n0 = posted.length;
      const a = await press(page, 'First wording of my question.');
      await page.unroute(origin + '/tasks', refuse);
      check(a.status === '503', `the press gave up with 503 (got ${a.status})`);
      const sendsA = posted.slice(n0);
      check(sendsA.length > 1 && sendsA.every((p) => p.key === a.key), `${sendsA.length} automatic sends with one key`);
      check(/Press Send again/.test(a.text), 'the page says a re-press is safe');

      // 2: the message is changed: a new key. This time the sends reach the
      // API (the task is recorded) but every answer is lost.
      const created = [];
      const lose = async (route) => {
        if (route.request().method() !== 'POST') return route.fallback();
        const resp = await route.fetch();
        try { created.push((await resp.json()).task_id); } catch { /* not JSON */ }
        return route.fulfill({ status: 503, headers: { 'Retry-After': '0', 'Content-Type': 'application/problem+json' },
          body: JSON.stringify({ type: 'about:blank', title: 'Bad gateway', status: 503, detail: 'reply lost by the test' }) });
      };
      await page.route(origin + '/tasks', lose);
      const bPress = await press(page, 'Second wording of my question.');
      await page.unroute(origin + '/tasks', lose);
      check(bPress.status === '503', `the press gave up (got ${bPress.status})`);
      check(bPress.key && bPress.key !== a.key && bPress.reused === 'false', 'a changed message gets a new key');
      check(created.length > 1 && created.every((id) => id && id === created[0]), `the API recorded one task for every lost send (${created.join(',')})`);

      // 3: the same message pressed again: the same key, the same task.
      const c = await press(page, null);
      check(c.key === bPress.key && c.reused === 'true', `the re-press reuses the key (${c.key} vs ${bPress.key})`);
      check(c.status === '200' && c.replayed === 'true', `answered as a replay (${c.status}, ${c.text})`);
      check(c.taskID === created[0], `the same task id comes back (${c.taskID} vs ${created[0]})`);
      report.tasks.repressed = c.taskID;
      await page.waitForSelector(`#chat-log li.msg-assistant[data-task-id="${c.taskID}"][data-saved="true"]`);
      check(await page.inputValue('#chat-input') === '', 'the box is cleared once the turn is accepted');
      return { keyA: a.key.slice(0, 8), keyB: bPress.key.slice(0, 8), sendsA: sendsA.length, taskID: c.taskID };
    });

    await step('a document attached to the conversation is read with the next message', async () => {
      const buffer = Buffer.from('Decision A: keep the ledger.\nDecision B: stream replies.\n');
      const sha = createHash('sha256').update(buffer).digest('hex');
      await page.click('#chat-docs summary');
      await page.setInputFiles('#chat-documents', { name: 'decisions.txt', mimeType: 'text/plain', buffer });
      await page.waitForSelector('#chat-doc-list li[data-name="decisions.txt"][data-state="ready"]');
      check(await page.getAttribute('#chat-doc-list li', 'data-sha256') === sha, 'hashed in the page');
      const n = posted.length;
      const st = await press(page, 'What are the key decisions in this document?');
      check(st.status === '202', `202 (got ${st.status}: ${st.text})`);
      report.tasks.withDocument = st.taskID;
      const body = JSON.parse(posted[n].body);
      check(Array.isArray(body.documents) && body.documents.length === 1 && body.documents[0].upload_id, 'the submit names the upload');
      await page.waitForSelector(`#chat-log li.msg-assistant[data-task-id="${st.taskID}"][data-saved="true"]`);
      const r = await lastReply(page);
      check(r.text.includes('sha256:' + sha + ' bytes:' + buffer.length), `the reply names the document read (${r.text.slice(0, 160)})`);
      const users = await page.$$eval('#chat-log li.msg-user', (els) => els.map((e) => e.textContent));
      check(users[users.length - 1].includes('with 1 document'), 'the turn says it carried a document');
      await h.shot(page, 'chat-06-document.png');
      return { taskID: st.taskID, sha: sha.slice(0, 12) };
    });

    await step('without a stream the reply shows the task\'s progress, then its saved result', async () => {
      // The stream refuses every connection from now on: the page polls.
      await page.routeWebSocket(() => true, (ws) => ws.close());
      // Held before its first word until the page has shown the task's
      // progress.
      const unstreamed = 'Answer without streaming, please.';
      await allow(unstreamed, 0);
      const st = await press(page, unstreamed);
      check(st.status === '202', `202 (got ${st.status})`);
      report.tasks.polled = st.taskID;
      await page.waitForFunction((id) => {
        const li = document.querySelector(`#chat-log li.msg-assistant[data-task-id="${id}"]`);
        return li && li.getAttribute('data-state') === 'running' && li.getAttribute('data-streaming') !== 'true' &&
          /attempt \d+ of \d+ running/.test(li.querySelector('.msg-text').textContent);
      }, st.taskID);
      const summary = (await lastReply(page)).text;
      await allow(unstreamed, -1);
      await page.waitForSelector(`#chat-log li.msg-assistant[data-task-id="${st.taskID}"][data-saved="true"]`);
      const r = await lastReply(page);
      check(r.text === await savedText(page, st.taskID), 'then the saved result');
      return { summary };
    });

    await step('screenshots, light and dark; no CSP violation, no foreign request', async () => {
      await h.shot(page, 'chat-04-light.png');
      await page.emulateMedia({ colorScheme: 'dark' });
      await h.shot(page, 'chat-05-dark.png');
      await page.emulateMedia({ colorScheme: 'light' });
      check(csp.length === 0, 'CSP violations: ' + csp.join(' | '));
      check(foreign.length === 0, 'foreign requests: ' + foreign.join(', '));
      return null;
    });
    report.ok = true;
  } catch (err) {
    await h.shot(page, 'chat-failed.png').catch(() => {});
    throw err;
  } finally {
    await b.close();
  }
});
