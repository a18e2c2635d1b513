// A queue's page: its figures and replicas, charts, consumers, bindings, arguments and
// effective policy; publish, get, purge, delete, replay, and (administrators, replicated
// queues) transfer the leader, sync and cancel sync.

import {h, fill, field, facts, formValues, section, select, confirmButton} from '../dom.js';
import * as fmt from '../format.js';
import {apiPath} from '../api.js';
import {plainTable} from '../table.js';
import {LineChart} from '../chart.js';
import {link} from '../router.js';
import {
  MESSAGE_RATES, chartSeries, getSampled, lengthSpecs, present, rateSpecs,
} from '../samples.js';
import {perform} from './actions.js';
import {messagesTable, publishForm} from './message_forms.js';
import {replayView} from './replay.js';
import {bindingForm, unbindButton} from './bindings.js';

const RATES = rateSpecs(MESSAGE_RATES);
const LENGTHS = lengthSpecs((answer) => answer);

const CONSUMERS = [
  {key: 'tag', label: 'Consumer tag', value: (c) => c.consumer_tag},
  {key: 'channel', label: 'Channel', value: (c) => c.channel_details?.name},
  {key: 'ack', label: 'Ack required', value: (c) => (c.ack_required ? 'yes' : 'no')},
  {key: 'exclusive', label: 'Exclusive', value: (c) => (c.exclusive ? 'yes' : 'no')},
  {key: 'prefetch', label: 'Prefetch', numeric: true, value: (c) => c.prefetch_count},
  {key: 'arguments', label: 'Arguments', value: (c) => fmt.json(c.arguments)},
];

const BINDINGS = [
  {key: 'source', label: 'From exchange', value: (b) => b.source || '(default)',
    render: (b) => (b.source ? h('a', {href: link('exchanges', b.vhost, b.source)}, b.source)
      : '(default exchange)')},
  {key: 'routing_key', label: 'Routing key', value: (b) => b.routing_key},
  {key: 'arguments', label: 'Arguments', value: (b) => fmt.json(b.arguments)},
];

/** A fact that may be empty (no arguments, no policy, no followers) reads "none". */
function orNone(text, wrap = (t) => t) {
  return text === '' || text === undefined || text === null
    ? h('span', {class: 'muted'}, 'none') : wrap(text);
}

const code = (text) => h('code', {}, text);

function details(q) {
  return facts([
    ['Leader', h('span', {'data-fact': 'leader'}, q.node)], ['Members', fmt.names(q.members)],
    ['Online', fmt.names(q.online)], ['In sync', fmt.names(q.in_sync)],
    ['Follower lag', orNone(fmt.followerLag(q))], ['Epoch', q.epoch], ['State', q.state],
    ['Ready', fmt.count(q.messages_ready)], ['Unacked', fmt.count(q.messages_unacknowledged)],
    ['Total', fmt.count(q.messages)], ['Consumers', fmt.count(q.consumers)],
    ['Offsets', q.first_offset === undefined ? '' : `${q.first_offset} to ${q.next_offset}`],
    ['Log size', fmt.bytes(q.log_bytes)],
    ['Durable', q.durable ? 'yes' : 'no'], ['Auto-delete', q.auto_delete ? 'yes' : 'no'],
    ['Exclusive', q.exclusive ? 'yes' : 'no'],
    ['Arguments', orNone(fmt.json(q.arguments), code)],
    ['Policy', orNone(q.policy)],
    ['Effective policy', orNone(fmt.json(q.effective_policy_definition), code)],
  ]);
}

function getForm(api, vhost, name) {
  const note = h('p', {class: 'note'});
  const results = h('div', {'data-result': 'get'});
  const form = h('form', {class: 'inline-form', 'data-form': 'get'},
    field('Ack mode', select('ackmode', [
      ['ack_requeue_true', 'Nack, requeue'], ['ack_requeue_false', 'Ack (remove)'],
      ['reject_requeue_true', 'Reject, requeue'], ['reject_requeue_false', 'Reject, drop']],
    'ack_requeue_true')),
    field('Encoding', select('encoding', [['auto', 'auto'], ['base64', 'base64']], 'auto')),
    field('Messages', h('input', {name: 'count', type: 'number', min: 1, max: 10000, value: 1})),
    h('button', {type: 'submit'}, 'Get messages'), note);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const values = formValues(form);
    const got = await perform(note, () => api.post(apiPath('queues', vhost, name, 'get'),
      {count: Number(values.count), ackmode: values.ackmode, encoding: values.encoding}),
    (messages) => `${messages.length} message(s).`);
    if (got) fill(results, messagesTable(got, 'got'));
  });
  return h('div', {}, form, results);
}

function dangerZone(api, vhost, name) {
  const note = h('p', {class: 'note'});
  return h('div', {class: 'actions'},
    confirmButton('Purge', () => perform(note,
      () => api.del(apiPath('queues', vhost, name, 'contents')), 'Queue purged.'),
    {'data-action': 'purge'}),
    confirmButton('Delete', async () => {
      const done = await perform(note, () => api.del(apiPath('queues', vhost, name)),
        'Queue deleted.');
      if (done !== undefined) location.hash = link('queues');
    }, {'data-action': 'delete'}),
    note);
}

function replicaActions(api, vhost, name, queue) {
  const note = h('p', {class: 'note'});
  const action = (body, text) => perform(note,
    () => api.post(apiPath('queues', vhost, name, 'actions'), body), text);
  const others = (queue.members ?? []).filter((m) => m !== queue.node);
  const target = select('node', [['', 'best in-sync follower'], ...others.map((m) => [m, m])], '');
  return h('div', {class: 'actions', 'data-actions': 'replicas'},
    field('Move leader to', target),
    h('button', {type: 'button', onclick: () => action(
      {action: 'transfer_leader', ...(target.value ? {node: target.value} : {})},
      (r) => `Leader is now ${r.leader}.`)}, 'Transfer leader'),
    h('button', {type: 'button', onclick: () => action({action: 'sync'}, 'Sync started.')},
      'Sync'),
    h('button', {type: 'button', onclick: () => action({action: 'cancel_sync'},
      'Sync cancelled.')}, 'Cancel sync'),
    note);
}

export function create({api, session, history}, {vhost, name}) {
  const rates = new LineChart('Message rates', fmt.rate);
  const lengths = new LineChart('Queued messages', fmt.count);
  const factsBox = h('div');
  const consumersBox = h('div');
  const bindingsBox = h('div');
  const bindNote = h('p', {class: 'note'});
  const again = () => refresh().catch(() => {});  // the periodic refresh reports failures
  const bindingColumns = session.readOnly ? BINDINGS : [...BINDINGS, {key: 'unbind', label: '',
    value: () => '', render: (b) => unbindButton(api, b, bindNote, again)}];
  const replicaBox = h('div');
  const writable = !session.readOnly;
  const element = h('div', {class: 'page', 'data-page': 'queue'},
    h('h1', {}, `Queue ${name}`, h('span', {class: 'muted'}, ` in vhost ${vhost}`)),
    section('Details', factsBox),
    section('Charts', h('div', {class: 'charts'}, rates.element, lengths.element)),
    section('Consumers', consumersBox),
    section('Bindings', bindingsBox, writable && bindingForm(api, vhost,
      {destination: name, kind: 'queue'}, bindNote, again), bindNote),
    writable && h('div', {class: 'columns'},
      section('Publish a message', publishForm(api, vhost, '', name)),
      section('Get messages', getForm(api, vhost, name))),
    section('Replay', replayView(api, vhost, name)),
    session.isAdmin && section('Replicas', replicaBox),
    writable && section('Purge or delete', dangerZone(api, vhost, name)));
  let replicaKey = null;
  let shownBindings = null;

  async function refresh() {
    const nowMs = Date.now();
    const path = apiPath('queues', vhost, name);
    const [queue, consumers, bindings] = await Promise.all([
      getSampled(api, path), api.get('/api/consumers'), api.get(`${path}/bindings`)]);
    fill(factsBox, details(queue));
    rates.draw(chartSeries(queue, present(RATES, queue), history, `queue ${vhost} ${name}`, nowMs));
    lengths.draw(chartSeries(queue, LENGTHS, history, `queue ${vhost} ${name}`, nowMs));
    fill(consumersBox, plainTable(CONSUMERS, consumers.filter((c) => c.queue?.name === name
      && c.queue?.vhost === vhost), (c) => c.consumer_tag, 'consumers'));
    const bindingsText = JSON.stringify(bindings);
    if (bindingsText !== shownBindings) {  // redrawn on change only: an armed Unbind stays
      shownBindings = bindingsText;
      fill(bindingsBox, plainTable(bindingColumns, bindings,
        (b) => `${b.source}/${b.properties_key}`, 'bindings'));
    }
    const key = `${queue.node}|${fmt.names(queue.members)}`;
    if (session.isAdmin && key !== replicaKey) {  // rebuilt only when the replicas change
      replicaKey = key;
      fill(replicaBox, (queue.members ?? []).length > 1 ? replicaActions(api, vhost, name, queue)
        : h('p', {class: 'muted'}, 'One copy: nothing to move or sync.'));
    }
  }

  return {element, refresh};
}
