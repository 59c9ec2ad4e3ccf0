/*
 * taskledger page: document attachments (DESIGN §12; docs/payloads.md "Documents:
 * presigned uploads"). The pure half is doclib.js.
 *
 * Attaching a file reads it, hashes it (SHA-256, Web Crypto), declares it
 * (POST /uploads {upload_id, sha256, size, content_type}, with an upload id
 * chosen here so that a retried declaration is the same one) and PUTs its
 * bytes to the presigned URL with exactly the headers the API named (less
 * Content-Length, which the browser sets). A file of a type or size the API
 * would refuse is refused before any request. Send stays disabled while a
 * file is hashing or uploading; a submit names the ready uploads
 * (documents:[{upload_id}]) and never uploads again, so the automatic
 * retries of a press, and a second press with the same attachments, send
 * the same documents under the same Idempotency-Key. A document problem of
 * the submit (upload-mismatch, upload-not-received, unknown-upload, …) is
 * said in words next to the file field and marks the file failed.
 *
 * app.js owns HTTP, the submit and the task view; it calls init once,
 * submission and problem around each submit, and render for every view.
 * make builds the same for another form (the Chat tab's), by element ids.
 * Only file names, sizes, types and hashes reach the DOM (textContent).
 */
(function () {
  'use strict';

  var L = window.TaskledgerLib;
  var D = window.TaskledgerDocLib;
  var $ = function (id) { return document.getElementById(id); };

  // make builds the attachments of one form: ids names its file input,
  // list, live status, help text and Send button (the task form's below;
  // the Chat tab makes its own).
  function make(ids) {
    var d = null;        // app.js's helpers: call, setStatus, el, networkText, isSending
    var items = [];      // [{key, name, size, contentType, format, sha256, uploadId, state, message}]
    var sent = [];       // the items named by the last submit, in order
    var seq = 0;

    var STATE_TEXT = { hashing: 'hashing…', uploading: 'uploading…', ready: 'ready', failed: 'failed' };

    function busy() {
      return items.some(function (it) { return it.state === 'hashing' || it.state === 'uploading'; });
    }

    // status says text in the live region next to the file field; quiet
    // keeps it for screen readers only (the failed file shows the same words).
    function status(text, kind, quiet) {
      var n = $(ids.status);
      d.setStatus(n, text || '', kind);
      n.classList.toggle('sr-only', !!quiet);
    }

    function render() {
      var ul = $(ids.list);
      ul.textContent = '';
      ul.hidden = items.length === 0;
      items.forEach(function (it) {
        var li = d.el('li', { 'data-testid': 'doc-item', 'data-state': it.state, 'data-name': it.name });
        if (it.sha256) li.setAttribute('data-sha256', it.sha256);
        if (it.uploadId && it.state === 'ready') li.setAttribute('data-upload-id', it.uploadId);
        var head = d.el('div', { 'class': 'doc-head' });
        head.appendChild(d.el('span', { 'class': 'doc-name' }, it.name));
        head.appendChild(d.el('span', { 'class': 'badge doc-state doc-' + it.state }, STATE_TEXT[it.state] || it.state));
        var rm = d.el('button', { type: 'button', 'class': 'secondary doc-remove', 'aria-label': 'Remove ' + it.name, 'data-testid': 'doc-remove' }, 'Remove');
        rm.addEventListener('click', function () { remove(it); });
        head.appendChild(rm);
        li.appendChild(head);
        var facts = [D.bytesText(it.size), it.format];
        if (it.sha256) facts.push('sha256 ' + D.shortSha(it.sha256));
        li.appendChild(d.el('div', { 'class': 'muted doc-facts' }, facts.join(' · ')));
        if (it.message) li.appendChild(d.el('div', { 'class': 'doc-msg', 'data-testid': 'doc-msg' }, it.message));
        ul.appendChild(li);
      });
      $(ids.input).disabled = items.length >= D.MAX_DOCUMENTS;
      $(ids.send).disabled = d.isSending() || busy();
    }

    function remove(it) {
      items = items.filter(function (x) { return x !== it; });
      status('Removed ' + it.name + '.', 'ok');
      render();
      $(ids.input).focus();
    }

    function live(it) { return items.indexOf(it) >= 0; }

    function fail(it, message) {
      if (!live(it)) return;
      it.state = 'failed';
      it.message = message;
      status(message, 'error', true);
      render();
    }

    // attach hashes, declares and uploads one accepted file.
    function attach(it, file) {
      var subtle = window.crypto && window.crypto.subtle;
      if (!subtle) return Promise.resolve(fail(it, it.name + ': this page cannot hash files here (Web Crypto needs https or localhost).'));
      return file.arrayBuffer().then(function (buf) {
        return subtle.digest('SHA-256', buf);
      }).then(function (digest) {
        if (!live(it)) return;
        it.sha256 = D.hex(digest);
        it.state = 'uploading';
        render();
        return d.call('POST', '/uploads', {
          body: JSON.stringify({ upload_id: it.uploadId, sha256: it.sha256, size: it.size, content_type: it.contentType })
        }).then(function (r) {
          if (!live(it)) return;
          var up = r.body;
          if (r.status !== 201 || !up || typeof up.url !== 'string') {
            return fail(it, D.documentProblemText(r.body, it.name) || it.name + ': ' + L.problemText(r.status, r.body, r.statusText));
          }
          return L.sendWithRetry(up.url, {
            method: up.method || 'PUT',
            headers: D.putHeaders(up.headers),
            body: file,
            mode: 'cors',
            credentials: 'omit',
            cache: 'no-store',
            referrerPolicy: 'no-referrer'
          }, { maxAttempts: 3 }).then(function (p) {
            if (!live(it)) return;
            if (p.response.status !== 200) {
              return fail(it, it.name + ': the upload was refused (HTTP ' + p.response.status + '). Remove it and attach it again.');
            }
            it.state = 'ready';
            it.message = '';
            render();
            if (!busy()) status(items.length + ' of ' + D.MAX_DOCUMENTS + ' documents attached.', 'ok');
          });
        });
      }).catch(function (err) {
        fail(it, it.name + ': ' + (err && err.message ? err.message : 'could not be read or uploaded') + '. Remove it and attach it again.');
      });
    }

    function onChange() {
      var input = $(ids.input);
      var files = Array.prototype.slice.call(input.files || []);
      input.value = '';
      var refused = [];
      var typed = false;
      files.forEach(function (file) {
        if (items.length >= D.MAX_DOCUMENTS) {
          refused.push(file.name + ': a task takes at most ' + D.MAX_DOCUMENTS + ' documents.');
          return;
        }
        var t = D.documentType(file.name, file.type, file.size);
        if (t.error) { refused.push(t.error); typed = true; return; }
        var it = {
          key: ++seq, name: file.name, size: file.size, contentType: t.contentType, format: t.format,
          sha256: '', uploadId: D.newUploadID(), state: 'hashing', message: ''
        };
        items.push(it);
        attach(it, file);
      });
      if (refused.length) status('Not attached — ' + refused.join(' ') + (typed ? ' ' + D.acceptedText() : ''), 'error');
      else if (files.length) status('Reading ' + files.length + (files.length === 1 ? ' file…' : ' files…'), 'busy');
      render();
    }

    // submission is what a submit adds to its body: {} without attachments,
    // {documents:[{upload_id}]} when every attachment is ready, else {error}.
    function submission() {
      sent = [];
      if (!items.length) return {};
      if (busy()) return { error: 'Wait until every attached file is uploaded.' };
      var bad = items.filter(function (it) { return it.state !== 'ready'; });
      if (bad.length) {
        return { error: 'Remove the failed attachment' + (bad.length > 1 ? 's' : '') + ' first: ' + bad.map(function (it) { return it.name; }).join(', ') + '.' };
      }
      sent = items.slice();
      return { documents: sent.map(function (it) { return { upload_id: it.uploadId }; }) };
    }

    // problem handles an error response of a submit: a document problem
    // marks its file failed and is said next to the file field. It returns
    // the words, or '' when body is no document problem.
    function problem(body) {
      var i = D.documentIndex(body);
      var it = i >= 0 ? sent[i] : null;
      var text = D.documentProblemText(body, it ? it.name : '');
      if (!text) return '';
      if (it && live(it)) fail(it, text);
      else status(text, 'error');
      $(ids.input).focus();
      return text;
    }

    // renderView lists a task's documents in the task view.
    function renderView(v) {
      var ds = v && Array.isArray(v.documents) ? v.documents : [];
      $('task-documents-box').hidden = ds.length === 0;
      var ul = $('task-documents');
      ul.textContent = '';
      ds.forEach(function (doc, i) {
        var li = d.el('li', { 'data-sha256': doc.sha256 || '', 'data-testid': 'task-document' });
        li.appendChild(d.el('span', { 'class': 'muted' }, 'document-' + (i + 1) + ' '));
        li.appendChild(d.el('code', { 'class': 'hash', title: doc.sha256 || '' }, 'sha256 ' + D.shortSha(doc.sha256)));
        li.appendChild(document.createTextNode(' · ' + D.bytesText(doc.size || 0) + ' · ' + (doc.content_type || '')));
        ul.appendChild(li);
      });
    }

    function init(deps) {
      d = deps;
      var input = $(ids.input);
      input.setAttribute('accept', D.ACCEPT);
      $(ids.help).textContent = 'Up to ' + D.MAX_DOCUMENTS + ' files. ' + D.acceptedText();
      input.addEventListener('change', onChange);
      render();
    }

    // clear forgets every attachment (the Chat tab's new conversation).
    function clear() {
      items = [];
      sent = [];
      status('', '');
      render();
    }

    return { init: init, busy: busy, submission: submission, problem: problem, render: renderView, clear: clear };
  }

  var tasks = make({ input: 'documents', list: 'doc-list', status: 'doc-status', help: 'doc-help', send: 'send' });
  tasks.make = make;
  window.TaskledgerDocuments = tasks;
})();
