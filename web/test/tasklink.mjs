// Browser test of the link a notification carries, in headless Debian
// Chromium driven by playwright-core (never a downloaded browser build).
//
//   node web/test/tasklink.mjs <stack URL> <screenshot dir>
//
// Notifications link to <page_origin>/#task=<id> ("links to the task on
// the page", docs/destinations.md): a submit makes a task, then a fresh
// page opened at that link must show that task's view. Prints one JSON
// report line on stdout (harness.mjs).
import { createRun, launch, run, mkdir, STEP_TIMEOUT } from './harness.mjs';

const [, , stackURL, shotDirArg] = process.argv;
if (!stackURL || !shotDirArg) {
  console.error('usage: node tasklink.mjs <stack URL> <screenshot dir>');
  process.exit(2);
}
const origin = new URL(stackURL).origin;
const h = createRun('tasklink', shotDirArg);
const { report, log, step, check, shotDir } = h;

run(report, log, 120_000, async () => {
  await mkdir(shotDir, { recursive: true });
  const b = await launch(origin, report);
  const { page } = b;
  try {
    await page.goto(stackURL + '/', { waitUntil: 'load' });
    let taskID = '';
    await step('a submitted task', async () => {
      await page.fill('#prompt', 'A task a notification links to.');
      await page.click('#send');
      await page.waitForSelector('#submit-status[data-status="202"]', { timeout: STEP_TIMEOUT });
      taskID = await page.getAttribute('#submit-status', 'data-task-id');
      report.tasks.linked = taskID;
      check(/^t_[a-z2-7]{26}$/.test(taskID), 'a task id: ' + taskID);
      return { taskID };
    });

    await step("the notification's link opens that task", async () => {
      const fresh = await b.context.newPage();
      await fresh.goto(stackURL + '/#task=' + encodeURIComponent(taskID), { waitUntil: 'load' });
      let shown = true;
      try {
        await fresh.waitForSelector(`#task-view[data-task-id="${taskID}"]`, { timeout: 15_000 });
      } catch (e) {
        shown = false;
      }
      await h.shot(fresh, 'tasklink-01-opened.png');
      const viewing = await fresh.evaluate(() => {
        const v = document.getElementById('task-view');
        return v ? v.getAttribute('data-task-id') : null;
      });
      check(shown, `the page opened at #task=${taskID} shows task ${viewing || '(none)'}, want ${taskID}`);
      return { viewing };
    });
    report.ok = true;
  } finally {
    await b.close();
  }
});
