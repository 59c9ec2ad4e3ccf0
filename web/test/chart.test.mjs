// Unit tests of the Overview tab's chart helpers (web/static/chart.js):
// node --test web/test/chart.test.mjs. No browser, no dependencies.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const C = require('../static/chart.js');

test('formatAge: seconds, minutes, hours, days; nothing for zero', () => {
  assert.equal(C.formatAge(0), '—');
  assert.equal(C.formatAge(null), '—');
  assert.equal(C.formatAge(45.9), '45 s');
  assert.equal(C.formatAge(185), '3 min 05 s');
  assert.equal(C.formatAge(2 * 3600 + 7 * 60), '2 h 07 min');
  assert.equal(C.formatAge(3 * 86400 + 4 * 3600 + 5), '3 d 4 h');
});

test('niceMax: steps of 1, 2, 5 × 10^n, never below 1', () => {
  assert.equal(C.niceMax(0), 1);
  assert.equal(C.niceMax(0.3), 1);
  assert.equal(C.niceMax(1), 1);
  assert.equal(C.niceMax(3), 5);
  assert.equal(C.niceMax(7), 10);
  assert.equal(C.niceMax(11), 20);
  assert.equal(C.niceMax(200), 200);
  assert.equal(C.niceMax(501), 1000);
});

test('barWidth: proportional, visible when non-zero, clamped', () => {
  assert.equal(C.barWidth(0, 10, 100), 0);
  assert.equal(C.barWidth(5, 10, 100), 50);
  assert.equal(C.barWidth(0.001, 10, 100), 2);
  assert.equal(C.barWidth(20, 10, 100), 100);
  assert.equal(C.barWidth(3, 0, 100), 0);
});

test('sparkPoints: left to right, zero at the bottom, max at the top', () => {
  assert.deepEqual(C.sparkPoints([0, 5, 10], 100, 22, 10), ['0,21', '50,11', '100,1']);
  assert.deepEqual(C.sparkPoints([], 100, 22), []);
  assert.deepEqual(C.sparkPoints([3], 100, 22, 3), ['100,1']);
  // Without a max, the scale is niceScale of the values.
  assert.deepEqual(C.sparkPoints([0, 4], 10, 12), ['0,11', '10,3']);
  // A fractional series (cost per minute) gets its own scale, not a flat line.
  assert.deepEqual(C.sparkPoints([0, 0.002], 10, 12), ['0,11', '10,1']);
});

test('niceScale: like niceMax above 1, fractional steps below', () => {
  assert.equal(C.niceScale(0), 1);
  assert.equal(C.niceScale(0.0019), 0.002);
  assert.equal(C.niceScale(0.003), 0.005);
  assert.equal(C.niceScale(0.5), 0.5);
  assert.equal(C.niceScale(3), 5);
});

test('sum and formatValue', () => {
  assert.equal(C.sum([1, null, 2.5]), 3.5);
  assert.equal(C.sum(null), 0);
  assert.equal(C.formatValue(3, ''), '3');
  assert.equal(C.formatValue(12345, ''), '12.3k');
  assert.equal(C.formatValue(0.0125, 'usd'), '$0.01');
  assert.equal(C.formatValue(0.004, 'usd'), '$0.0040');
  assert.equal(C.formatValue(0, 'usd'), '$0');
});
