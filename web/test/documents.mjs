// Browser test of the page's document attachments (DESIGN §12), in headless
// Debian Chromium driven by playwright-core.
//
//   node web/test/documents.mjs <stack URL> <screenshot dir>
//
// Attaches files built here through the page's file input: a type the API
// does not accept and an over-limit image are refused before any request;
// a .txt and a .png are hashed, declared and uploaded (Send disabled while
// an upload is held back), then submitted (the first send is answered 503
// by the test: the retry carries the same key and the same upload ids) and
// the task completes with a result naming each document's SHA-256 and a
// view listing them. Then a third file is attached, the test PUTs other
// bytes of the same length to its presigned URL (the emulators check no
// checksum), and the submit is refused with upload-mismatch, said next to
// the file field. Prints one JSON report line on stdout (harness.mjs);
// "hashes" holds the SHA-256 of each file, keyed by name.
import { createHash } from 'node:crypto';
import { deflateSync } from 'node:zlib';
import { createRun, launch, run, mkdir } from './harness.mjs';

const OVERALL_TIMEOUT = 150_000;
const [, , stackURL, shotDirArg] = process.argv;
if (!stackURL || !shotDirArg) {
  console.error('usage: node documents.mjs <stack URL> <screenshot dir>');
  process.exit(2);
}
const origin = new URL(stackURL).origin;
const { report, log, step, check, shot, text, shotDir } = createRun('documents', shotDirArg);
const sha256 = (b) => createHash('sha256').update(b).digest('hex');

// crc32 of PNG chunks (zlib.crc32 is newer than node 20).
const CRC = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32(buf) {
  let c = 0xffffffff;
  for (const b of buf) c = CRC[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

// png builds a real w×h RGB PNG (a colour gradient).
function png(w, h) {
  const chunk = (type, data) => {
    const len = Buffer.alloc(4); len.writeUInt32BE(data.length);
    const td = Buffer.concat([Buffer.from(type, 'ascii'), data]);
    const crc = Buffer.alloc(4); crc.writeUInt32BE(crc32(td));
    return Buffer.concat([len, td, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0); ihdr.writeUInt32BE(h, 4);
  ihdr[8] = 8; ihdr[9] = 2; // 8-bit RGB
  const rows = [];
  for (let y = 0; y < h; y++) {
    const row = Buffer.alloc(1 + w * 3);
    for (let x = 0; x < w; x++) { row[1 + x * 3] = x * 8; row[2 + x * 3] = y * 8; row[3 + x * 3] = 128; }
    rows.push(row);
  }
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr), chunk('IDAT', deflateSync(Buffer.concat(rows))), chunk('IEND', Buffer.alloc(0)),
  ]);
}

const TXT = { name: 'minutes.txt', mimeType: 'text/plain', buffer: Buffer.from('Minutes of the ledger meeting.\nDecided: never forget.\n') };
const PNG = { name: 'chart.png', mimeType: 'image/png', buffer: png(24, 16) };
const ALTERED = { name: 'contract.txt', mimeType: 'text/plain', buffer: Buffer.from('The contract as signed: 100 units.\n') };

// docItems lists the attachments the page shows.
const docItems = (page) => page.$$eval('#doc-list li', (lis) => lis.map((li) => ({
  name: li.dataset.name, state: li.dataset.state, sha: li.dataset.sha256 || '', uploadID: li.dataset.uploadId || '', text: li.textContent,
})));

async function main() {
  await mkdir(shotDir, { recursive: true });
  const b = await launch(origin, report);
  const { page } = b;
  // Requests the page sends for documents and tasks.
  const reqs = [];
  page.on('request', (r) => {
    const path = new URL(r.url()).pathname;
    if (path === '/uploads' || path.startsWith('/s3/') || path === '/tasks') {
      reqs.push({ method: r.method(), path, url: r.url(), headers: r.headers(), body: r.postData() || '' });
    }
  });
  try {
    await step('open the page: a file field with its accepted types and limits', async () => {
      await page.goto(stackURL, { waitUntil: 'load' });
      await page.waitForSelector('html[data-ready="true"]');
      const help = await text(page, '#doc-help');
      check(/Up to 5 files/.test(help) && /4,500,000 bytes/.test(help) && /3,750,000 bytes/.test(help), 'help names the count and size limits: ' + help);
      const accept = await page.getAttribute('#documents', 'accept');
      check(/\.md/.test(accept) && /\.png/.test(accept), 'accept hint: ' + accept);
      check((await page.textContent('label[for="documents"]')).includes('Documents'), 'the file field is labelled');
      return { help, accept };
    });

    await step('a type the API does not accept, and an over-limit image, are refused before any request', async () => {
      const before = reqs.length;
      await page.setInputFiles('#documents', [
        { name: 'tool.exe', mimeType: 'application/x-msdownload', buffer: Buffer.from('MZ not a document') },
        { name: 'huge.png', mimeType: 'image/png', buffer: Buffer.alloc(3_750_001, 1) },
      ]);
      await page.waitForSelector('#doc-status.error');
      const msg = await text(page, '#doc-status');
      check(/tool\.exe: this type of file \(application\/x-msdownload\) cannot be attached/.test(msg), 'names the refused file and its type: ' + msg);
      check(/Accepted: pdf, txt, md, html, csv, docx up to 4,500,000 bytes; png, jpeg up to 3,750,000 bytes/.test(msg), 'says what is accepted: ' + msg);
      check(/huge\.png is 3,750,001 bytes: a png may be at most 3,750,000 bytes/.test(msg), 'says the image is over its limit: ' + msg);
      check(msg.split('Accepted:').length === 2, 'the accepted types are said once: ' + msg);
      check((await docItems(page)).length === 0, 'nothing attached');
      check(reqs.length === before, `no request was sent (${reqs.length - before})`);
      await shot(page, 'documents-00-refused.png');
      return { msg };
    });

    await step('attach a .txt and a .png: hashed, declared, uploaded; Send disabled while uploading', async () => {
      let release;
      const held = new Promise((r) => { release = r; });
      const hold = async (route) => { await held; return route.fallback(); };
      await page.route(origin + '/s3/**', hold);
      try {
        await page.setInputFiles('#documents', [TXT, PNG]);
        await page.waitForSelector('#doc-list li[data-state="uploading"]');
        check(await page.isDisabled('#send'), 'Send is disabled while a file uploads');
      } finally {
        release();
      }
      await page.waitForFunction(() => {
        const lis = document.querySelectorAll('#doc-list li');
        return lis.length === 2 && Array.from(lis).every((li) => li.dataset.state === 'ready');
      });
      await page.unroute(origin + '/s3/**', hold);
      check(!(await page.isDisabled('#send')), 'Send is enabled again');
      const items = await docItems(page);
      report.hashes[TXT.name] = sha256(TXT.buffer);
      report.hashes[PNG.name] = sha256(PNG.buffer);
      for (const f of [TXT, PNG]) {
        const it = items.find((x) => x.name === f.name);
        check(it && it.sha === report.hashes[f.name], `${f.name}: the page's SHA-256 ${it && it.sha} is the file's`);
        check(it.text.includes(report.hashes[f.name].slice(0, 12)) && it.text.includes(f.buffer.length.toLocaleString('en-US') + ' bytes'), `${f.name}: short hash and size shown: ${it.text}`);
      }
      const declared = reqs.filter((r) => r.method === 'POST' && r.path === '/uploads').map((r) => JSON.parse(r.body));
      check(declared.length === 2, `two declarations (got ${declared.length})`);
      check(declared.some((d) => d.content_type === 'text/plain' && d.size === TXT.buffer.length && d.sha256 === report.hashes[TXT.name]), 'txt declared with its size, type and hash');
      check(declared.some((d) => d.content_type === 'image/png' && d.size === PNG.buffer.length && d.sha256 === report.hashes[PNG.name]), 'png declared with its size, type and hash');
      const puts = reqs.filter((r) => r.method === 'PUT');
      check(puts.length === 2, `two PUTs (got ${puts.length})`);
      for (const p of puts) {
        check(p.headers['x-amz-checksum-sha256'] && p.headers['content-type'], 'PUT carries the signed checksum and content type');
        check(!p.headers.authorization, 'PUT carries no Authorization (the URL is the capability)');
      }
      await shot(page, 'documents-01-attached.png');
      return { putHeaders: Object.keys(puts[0].headers).sort(), items: items.map((i) => ({ name: i.name, state: i.state, uploadID: i.uploadID })) };
    });

    await step('submit (first send answered 503): the retry sends the same documents; the task completes and names them', async () => {
      const from = reqs.length;
      let n = 0;
      const flaky = (route) => {
        if (route.request().method() !== 'POST' || n++ > 0) return route.fallback();
        return route.fulfill({ status: 503, headers: { 'Retry-After': '0', 'Content-Type': 'application/problem+json' },
          body: JSON.stringify({ type: 'about:blank', title: 'Service unavailable', status: 503, detail: 'injected by the test' }) });
      };
      await page.route(origin + '/tasks', flaky);
      const ids = (await docItems(page)).map((i) => i.uploadID);
      await page.fill('#prompt', 'Summarise the attached minutes and chart.');
      await page.click('#send');
      await page.waitForFunction(() => document.getElementById('submit-status').dataset.status === '202');
      await page.unroute(origin + '/tasks', flaky);
      const id = await page.getAttribute('#submit-status', 'data-task-id');
      report.tasks.withDocuments = id;
      const sends = reqs.slice(from).filter((r) => r.path === '/tasks' && r.method === 'POST');
      check(sends.length === 2, `two sends (got ${sends.length})`);
      check(sends[0].headers['idempotency-key'] && sends[0].headers['idempotency-key'] === sends[1].headers['idempotency-key'], 'same Idempotency-Key');
      check(sends[0].body === sends[1].body, 'the retry sends the same body');
      const docs = JSON.parse(sends[0].body).documents;
      check(JSON.stringify(docs) === JSON.stringify(ids.map((u) => ({ upload_id: u }))), 'documents are the attached uploads, in order: ' + JSON.stringify(docs));
      check(!reqs.slice(from).some((r) => r.path === '/uploads' || r.path.startsWith('/s3/')), 'nothing was uploaded again');
      await page.waitForSelector(`#task-view[data-task-id="${id}"][data-state="completed"]`);
      const result = await text(page, '#task-result');
      for (const f of [TXT, PNG]) {
        check(result.includes('sha256:' + report.hashes[f.name] + ' bytes:' + f.buffer.length), `the result names ${f.name}'s SHA-256 and size: ${result}`);
      }
      const listed = await page.$$eval('#task-documents li', (lis) => lis.map((li) => ({ sha: li.dataset.sha256, text: li.textContent })));
      check(listed.length === 2, `the view lists 2 documents (got ${listed.length})`);
      check(listed[0].sha === report.hashes[TXT.name] && listed[1].sha === report.hashes[PNG.name], 'in order, with their hashes');
      check(/text\/plain/.test(listed[0].text) && /image\/png/.test(listed[1].text), 'with their types: ' + JSON.stringify(listed));
      check(listed[1].text.includes(PNG.buffer.length.toLocaleString('en-US') + ' bytes'), 'with their sizes');
      await shot(page, 'documents-02-completed.png');
      return { id, result: result.slice(0, 300), listed };
    });

    await step('other bytes PUT to a presigned URL: the submit is refused with upload-mismatch, said next to the file', async () => {
      for (const name of [TXT.name, PNG.name]) await page.click(`#doc-list li[data-name="${name}"] .doc-remove`);
      check((await docItems(page)).length === 0, 'attachments removed');
      const from = reqs.length;
      await page.setInputFiles('#documents', [ALTERED]);
      await page.waitForSelector(`#doc-list li[data-name="${ALTERED.name}"][data-state="ready"]`);
      const put = reqs.slice(from).find((r) => r.method === 'PUT');
      check(put, 'the page PUT the file');
      // Same length, other bytes, same signed URL and headers.
      const other = Buffer.from(ALTERED.buffer.toString().replace('100', '900'));
      check(other.length === ALTERED.buffer.length && !other.equals(ALTERED.buffer), 'altered bytes of the same length');
      const headers = { ...put.headers };
      delete headers['content-length'];
      const r = await fetch(put.url, { method: 'PUT', headers, body: other });
      check(r.status === 200, `the test's PUT is accepted by the emulator (got ${r.status})`);
      const tasksBefore = reqs.filter((x) => x.path === '/tasks').length;
      await page.fill('#prompt', 'Check the contract.');
      await page.click('#send');
      await page.waitForFunction(() => document.getElementById('submit-status').dataset.status === '422');
      const submitMsg = await text(page, '#submit-status');
      const docMsg = await text(page, '#doc-status');
      check(/contract\.txt: the bytes the API received differ from the file this page read/.test(docMsg), 'said next to the file field: ' + docMsg);
      check(/Upload does not match its declaration \(422\): nothing was recorded; see Documents above/.test(submitMsg), 'the submit status names the problem: ' + submitMsg);
      check(await page.isVisible('#doc-list li[data-state="failed"] .doc-msg'), 'the words are shown on the failed file');
      const it = (await docItems(page))[0];
      check(it.state === 'failed' && /differ/.test(it.text), 'the file is marked failed with the reason');
      check(await page.getAttribute('#doc-status', 'role') === 'status' && await page.getAttribute('#doc-status', 'aria-live') === 'polite', 'the message is in a live region');
      await shot(page, 'documents-03-mismatch.png');
      await page.emulateMedia({ colorScheme: 'dark' });
      await shot(page, 'documents-04-mismatch-dark.png');
      await page.emulateMedia({ colorScheme: 'light' });
      // A failed attachment blocks the next press, without a request.
      await page.click('#send');
      await page.waitForFunction(() => /Remove the failed attachment/.test(document.getElementById('submit-status').textContent));
      check(reqs.filter((x) => x.path === '/tasks').length === tasksBefore + 1, 'one submit was sent (the refused one), none after');
      return { submitMsg, docMsg };
    });

    await step('no page errors, no CSP violations, no foreign network loads', async () => {
      const pageErrors = report.errors.filter((e) => e.startsWith('pageerror'));
      check(pageErrors.length === 0, 'page errors: ' + pageErrors.join('; '));
      check(b.csp.length === 0, 'CSP violations: ' + b.csp.join('; '));
      check(b.foreign.length === 0, 'foreign requests: ' + b.foreign.join(', '));
      return { consoleErrors: report.errors };
    });
    report.ok = true;
  } catch (err) {
    await shot(page, 'documents-failure.png').catch(() => {});
    throw err;
  } finally {
    await b.close();
  }
}

run(report, log, OVERALL_TIMEOUT, main);
