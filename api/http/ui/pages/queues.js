// Queues: every queue the user may see, in a sortable, filterable, paged table (type,
// leader, members, in-sync set, follower lag, ready / unacked / total, rates), and a
// form to declare one.

import {h, field, formValues} from '../dom.js';
import * as fmt from '../format.js';
import {DataTable} from '../table.js';
import {apiPath} from '../api.js';
import {link} from '../router.js';
import {perform, parseJsonObject} from './actions.js';
import {vhostSelect} from './vhosts.js';

const COLUMNS = [
  {key: 'vhost', label: 'Vhost', value: (q) => q.vhost},
  {key: 'name', label: 'Name', value: (q) => q.name,
    render: (q) => h('a', {href: link('queues', q.vhost, q.name)}, q.name)},
  {key: 'type', label: 'Type', value: (q) => q.type},
  {key: 'node', label: 'Leader', value: (q) => q.node},
  {key: 'members', label: 'Members', value: (q) => fmt.names(q.members)},
  {key: 'in_sync', label: 'In sync', value: (q) => fmt.names(q.in_sync)},
  {key: 'lag', label: 'Follower lag', value: fmt.followerLag},
  {key: 'state', label: 'State', value: (q) => q.state},
  {key: 'ready', label: 'Ready', numeric: true, value: (q) => q.messages_ready,
    render: (q) => fmt.count(q.messages_ready)},
  {key: 'unacked', label: 'Unacked', numeric: true, value: (q) => q.messages_unacknowledged,
    render: (q) => fmt.count(q.messages_unacknowledged)},
  {key: 'total', label: 'Total', numeric: true, value: (q) => q.messages,
    render: (q) => fmt.count(q.messages)},
  {key: 'publish', label: 'Publish', numeric: true,
    value: (q) => fmt.statRate(q.message_stats, 'publish'),
    render: (q) => fmt.rate(fmt.statRate(q.message_stats, 'publish'))},
  {key: 'deliver', label: 'Deliver', numeric: true,
    value: (q) => fmt.statRate(q.message_stats, 'deliver_get'),
    render: (q) => fmt.rate(fmt.statRate(q.message_stats, 'deliver_get'))},
  {key: 'ack', label: 'Ack', numeric: true,
    value: (q) => fmt.statRate(q.message_stats, 'ack'),
    render: (q) => fmt.rate(fmt.statRate(q.message_stats, 'ack'))},
];

async function declareForm(api) {
  const note = h('p', {class: 'note'});
  const form = h('form', {id: 'declare-queue', class: 'inline-form'},
    field('Vhost', await vhostSelect(api)),
    field('Name', h('input', {name: 'name', required: true, maxlength: 255})),
    field('Durable', h('input', {name: 'durable', type: 'checkbox', checked: true})),
    field('Auto-delete', h('input', {name: 'auto_delete', type: 'checkbox'})),
    field('Replicas', h('input', {name: 'replicas', type: 'number', min: 1, max: 9,
      placeholder: 'all/policy'})),
    field('Arguments (JSON)', h('input', {name: 'arguments', placeholder: '{"x-max-length": 1000}',
      class: 'wide'})),
    h('button', {type: 'submit'}, 'Add queue'), note);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const values = formValues(form);
    await perform(note, async () => {
      const args = parseJsonObject(values.arguments, 'arguments');
      if (values.replicas) args['x-queue-replicas'] = Number(values.replicas);
      await api.put(apiPath('queues', values.vhost, values.name),
        {durable: values.durable, auto_delete: values.auto_delete, arguments: args});
    }, `Queue '${values.name}' declared.`);
  });
  return form;
}

export function create({api, session}) {
  const table = new DataTable({columns: COLUMNS, rowKey: (q) => `${q.vhost}/${q.name}`,
    sortKey: 'name', name: 'queues', empty: 'No queues.'});
  const adder = h('div');
  const element = h('div', {class: 'page', 'data-page': 'queues'},
    h('h1', {}, 'Queues'), table.element, adder);
  if (!session.readOnly) {
    declareForm(api).then((form) => adder.append(h('section', {class: 'panel'},
      h('h2', {}, 'Add a queue'), form)));
  }

  async function refresh() {
    table.setRows(await api.get('/api/queues'));
  }

  return {element, refresh};
}
