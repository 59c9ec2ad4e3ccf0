/*
 * taskledger page: pure logic of document attachments (no DOM). Loaded as
 * a classic script by index.html, where it defines
 * globalThis.TaskledgerDocLib, and by the node unit tests
 * (web/test/lib.test.mjs) through require(). documents.js is its DOM half.
 *
 * The accepted formats and limits are the API's (docs/payloads.md "Documents:
 * presigned uploads", internal/payload.Formats): a file is refused here,
 * before any request, when the API would refuse it.
 */
(function (root) {
  'use strict';

  // MAX_DOCUMENTS is the most documents one task may reference.
  var MAX_DOCUMENTS = 5;
  var DOC_MAX = 4500000;
  var IMAGE_MAX = 3750000;
  var DOCX = 'application/vnd.openxmlformats-officedocument.wordprocessingml.document';

  // FORMATS: content type -> {name, max}, as the API accepts them.
  var FORMATS = {
    'application/pdf': { name: 'pdf', max: DOC_MAX },
    'text/plain': { name: 'txt', max: DOC_MAX },
    'text/markdown': { name: 'md', max: DOC_MAX },
    'text/html': { name: 'html', max: DOC_MAX },
    'text/csv': { name: 'csv', max: DOC_MAX }
  };
  FORMATS[DOCX] = { name: 'docx', max: DOC_MAX };
  FORMATS['image/png'] = { name: 'png', max: IMAGE_MAX };
  FORMATS['image/jpeg'] = { name: 'jpeg', max: IMAGE_MAX };

  // EXTENSIONS map a file name's extension to its content type: browsers
  // give no type for .md on many systems, and a wrong one for .csv on some
  // (application/vnd.ms-excel).
  var EXTENSIONS = {
    pdf: 'application/pdf', txt: 'text/plain', text: 'text/plain', md: 'text/markdown', markdown: 'text/markdown',
    html: 'text/html', htm: 'text/html', csv: 'text/csv', docx: DOCX,
    png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg'
  };

  // ACCEPT is the file input's accept attribute (a hint to the picker; the
  // check is documentType).
  var ACCEPT = Object.keys(EXTENSIONS).map(function (e) { return '.' + e; }).join(',');

  // bytesText renders a byte count with thousands separators.
  function bytesText(n) {
    return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',') + ' bytes';
  }

  // acceptedText says which types and sizes are accepted.
  function acceptedText() {
    return 'Accepted: pdf, txt, md, html, csv, docx up to ' + bytesText(DOC_MAX) +
      '; png, jpeg up to ' + bytesText(IMAGE_MAX) + '.';
  }

  function extension(name) {
    var m = /\.([A-Za-z0-9]+)$/.exec(String(name || ''));
    return m ? m[1].toLowerCase() : '';
  }

  // documentType decides the content type of a file from its name and the
  // type the browser reported: a known extension wins (the browser's type
  // may be missing or wrong); else the browser's type when accepted. It
  // returns {contentType, format, max} or {error} (nothing is sent; the
  // caller adds acceptedText once for all refused files).
  function documentType(name, browserType, size) {
    var ct = EXTENSIONS[extension(name)] || '';
    var given = String(browserType || '').toLowerCase().split(';')[0].trim();
    if (!ct && FORMATS[given]) ct = given;
    if (!ct) {
      return { error: name + ': this type of file (' + (given || 'unknown type') + ') cannot be attached.' };
    }
    var f = FORMATS[ct];
    if (!(size >= 1)) return { error: name + ' is empty: there is nothing to attach.' };
    if (size > f.max) {
      return { error: name + ' is ' + bytesText(size) + ': a ' + f.name + ' may be at most ' + bytesText(f.max) + '.' };
    }
    return { contentType: ct, format: f.name, max: f.max };
  }

  // hex renders a digest (ArrayBuffer or Uint8Array) as lowercase hex.
  function hex(buf) {
    var b = buf instanceof Uint8Array ? buf : new Uint8Array(buf);
    var s = '';
    for (var i = 0; i < b.length; i++) s += (b[i] + 0x100).toString(16).slice(1);
    return s;
  }

  // shortSha is the first 12 hex digits of a SHA-256, for display.
  function shortSha(h) {
    return h ? String(h).slice(0, 12) + '…' : '';
  }

  // putHeaders are the headers of the presigned PUT: every header the API
  // named except Content-Length (the browser sets it from the body and
  // refuses to be told) and Host.
  function putHeaders(h) {
    var out = {};
    if (!h || typeof h !== 'object') return out;
    Object.keys(h).forEach(function (k) {
      var l = k.toLowerCase();
      if (l === 'content-length' || l === 'host') return;
      out[k] = String(h[k]);
    });
    return out;
  }

  // newUploadID is a client-chosen upload id ("up_" and 32 hex digits, as
  // the server chooses them): POST /uploads retried with the same id is the
  // same declaration, never a second upload.
  function newUploadID(c) {
    c = c || root.crypto;
    var b = new Uint8Array(16);
    c.getRandomValues(b);
    return 'up_' + hex(b);
  }

  var PROBLEM = 'https://taskledger.dev/problems/';

  // problemName is the short name of a problem document's type
  // ("upload-mismatch"), or ''.
  function problemName(body) {
    var t = body && typeof body.type === 'string' ? body.type : '';
    return t.indexOf(PROBLEM) === 0 ? t.slice(PROBLEM.length) : '';
  }

  // documentIndex is i of a problem's field "documents[i]…", or -1.
  function documentIndex(body) {
    var m = /^documents\[(\d+)\]/.exec(body && typeof body.field === 'string' ? body.field : '');
    return m ? +m[1] : -1;
  }

  // documentProblemText says in words what a document problem means for
  // the file called name, and what to do; '' when body is not one.
  function documentProblemText(body, name) {
    var n = name || 'This document';
    switch (problemName(body)) {
      case 'upload-mismatch':
        return n + ': the bytes the API received differ from the file this page read (size, SHA-256 or type), so it was not used. Remove it and attach the file again.';
      case 'upload-not-received':
        return n + ': the API has not received its bytes. Remove it and attach it again.';
      case 'unknown-upload':
        return n + ': the API does not know this upload (uploads expire after a day). Remove it and attach it again.';
      case 'document-too-large':
        return n + ' is too large. ' + acceptedText();
      case 'unsupported-document-type':
        return n + ': this type cannot be attached. ' + acceptedText();
      case 'upload-id-taken':
        return n + ': its upload id is taken. Remove it and attach it again.';
      case 'uploads-not-configured':
        return 'This API accepts no documents (it has no payload bucket).';
    }
    return '';
  }

  var lib = {
    MAX_DOCUMENTS: MAX_DOCUMENTS,
    FORMATS: FORMATS,
    ACCEPT: ACCEPT,
    bytesText: bytesText,
    acceptedText: acceptedText,
    documentType: documentType,
    hex: hex,
    shortSha: shortSha,
    putHeaders: putHeaders,
    newUploadID: newUploadID,
    problemName: problemName,
    documentIndex: documentIndex,
    documentProblemText: documentProblemText
  };
  root.TaskledgerDocLib = lib;
  if (typeof module === 'object' && module.exports) module.exports = lib;
})(typeof globalThis !== 'undefined' ? globalThis : this);
