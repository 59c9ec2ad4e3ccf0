// Browser test of streamed replies on the page, in headless Debian Chromium
// driven by playwright-core (never a downloaded browser build).
//
//   node web/test/stream.mjs <stack URL> <screenshot dir>
//
// Submits a task whose reply the test's stream gate holds at word 2, then
// at word 4, and checks that the "Reply so far" box shows text that grows
// while the task is still running, then gives way to the saved result,
// which continues the streamed text. Prints one JSON report line on stdout
// (harness.mjs).
import { createRun, launch, run, mkdir, streamGate } from './harness.mjs';

const [, , stackURL, shotDirArg] = process.argv;
if (!stackURL || !shotDirArg) {
  console.error('usage: node stream.mjs <stack URL> <screenshot dir>');
  process.exit(2);
}
const origin = new URL(stackURL).origin;
const h = createRun('stream', shotDirArg);
const { report, log, step, check, shotDir } = h;
const allow = streamGate();

// sample reads the streamed text and the task's state at one moment.
async function sample(page) {
  return page.evaluate(() => ({
    text: document.getElementById('task-stream-text').textContent,
    hidden: document.getElementById('task-stream').hidden,
    state: document.getElementById('task-view').getAttribute('data-state'),
  }));
}

run(report, log, 150_000, async () => {
  await mkdir(shotDir, { recursive: true });
  const b = await launch(origin, report);
  const { page, foreign, csp } = b;
  try {
    await page.goto(stackURL + '/', { waitUntil: 'load' });
    let taskID = '';
    const samples = [];

    await step('streamed text grows while the task runs', async () => {
      // The reply has more than 4 words (its header alone has 5): held at
      // 2, then at 4, the task cannot end between the two readings.
      const prompt = 'Stream me a reply about ledgers.';
      await allow(prompt, 2);
      await page.fill('#prompt', prompt);
      await page.click('#send');
      await page.waitForSelector('#submit-status[data-status="202"]');
      taskID = await page.getAttribute('#submit-status', 'data-task-id');
      report.tasks.streamed = taskID;
      const shown = (longer) => page.waitForFunction((n) => {
        const box = document.getElementById('task-stream');
        return !box.hidden && document.getElementById('task-stream-text').textContent.length > n;
      }, longer);
      await shown(0);
      samples.push(await sample(page));
      await h.shot(page, 'stream-01-growing.png');
      await allow(prompt, 4);
      await shown(samples[0].text.length);
      samples.push(await sample(page));
      await allow(prompt, -1);
      check(samples.every((s) => s.state !== 'completed'), `every reading was taken before completion (${samples.map((s) => s.state)})`);
      check(samples[1].text.startsWith(samples[0].text), 'the later text continues the earlier one');
      return { lengths: samples.map((s) => s.text.length), states: samples.map((s) => s.state) };
    });

    await step('the saved result replaces the stream and continues its text', async () => {
      await page.waitForSelector(`#task-view[data-task-id="${taskID}"][data-state="completed"]`);
      const s = await sample(page);
      check(s.hidden, 'the streaming box is hidden once the result is saved');
      const result = await page.textContent('#task-result');
      check(result.startsWith(samples[samples.length - 1].text), 'the saved result continues the streamed text');
      await h.shot(page, 'stream-02-saved.png');
      check(csp.length === 0, 'CSP violations: ' + csp.join(' | '));
      check(foreign.length === 0, 'foreign requests: ' + foreign.join(', '));
      return { resultChars: result.length };
    });
    report.ok = true;
  } finally {
    await b.close();
  }
});
