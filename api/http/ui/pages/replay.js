// Replay: read a queue's log from an offset or a time, a page at a time, without
// consuming (GET /api/queues/{vhost}/{name}/messages). Previous pages are remembered as
// the offsets they started at, a bounded number of them.

import {h, fill, field, formValues, message} from '../dom.js';
import {apiPath} from '../api.js';
import {messagesTable} from './message_forms.js';

const MAX_BACK_PAGES = 1000;

export function replayView(api, vhost, queue) {
  const note = h('p', {class: 'note'});
  const results = h('div', {class: 'replay-results'});
  const position = h('span', {class: 'muted', 'data-replay': 'position'});
  const back = [];
  let current = null;
  let next = null;
  const prev = h('button', {type: 'button', disabled: true, 'data-replay': 'previous',
    onclick: () => { if (back.length) read({from_offset: back.pop()}, false); }},
  '‹ Previous page');
  const more = h('button', {type: 'button', disabled: true, 'data-replay': 'next',
    onclick: () => { if (next !== null) read({from_offset: next}, true); }}, 'Next page ›');
  const form = h('form', {class: 'inline-form', 'data-form': 'replay'},
    field('From offset', h('input', {name: 'from_offset', type: 'number', min: 0, value: 0})),
    field('or from time', h('input', {name: 'from_time', type: 'datetime-local', step: 1})),
    field('Page size', h('input', {name: 'page_size', type: 'number', min: 1, max: 10000,
      value: 20})),
    h('button', {type: 'submit'}, 'Replay'), note);
  let pageSize = 20;

  async function read(start, forward) {
    const query = new URLSearchParams({...start, max_messages: pageSize});
    try {
      const page = await api.get(`${apiPath('queues', vhost, queue, 'messages')}?${query}`);
      if (forward && current !== null && back.length < MAX_BACK_PAGES) back.push(current);
      const first = page.messages.length ? page.messages[0].offset : page.next_offset;
      current = first;
      next = page.next_offset < page.end_offset ? page.next_offset : null;
      fill(results, messagesTable(page.messages, 'replay'));
      fill(position, page.messages.length
        ? `offsets ${first}–${page.next_offset - 1}; the log holds ${page.first_offset}–`
          + `${page.end_offset - 1}`
        : `nothing from there; the log holds offsets ${page.first_offset} to `
          + `${page.end_offset} (exclusive)`);
      prev.disabled = back.length === 0;
      more.disabled = next === null;
      message(note, '', true);
    } catch (error) {
      const leader = error.headers?.get?.('X-Queue-Leader-Url');
      message(note, leader ? `This node has no readable copy of the queue: open the UI of `
        + `its leader, ${leader}` : `Refused: ${error.message}`, false);
    }
  }

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const values = formValues(form);
    pageSize = Math.max(1, Math.min(10000, Number(values.page_size) || 20));
    back.length = 0;
    current = null;
    const start = values.from_time
      ? {from_timestamp: new Date(values.from_time).getTime()}
      : {from_offset: Math.max(0, Number(values.from_offset) || 0)};
    read(start, false);
  });
  return h('div', {'data-view': 'replay'}, form, h('div', {class: 'pager'}, prev, more, ' ',
    position), results);
}
