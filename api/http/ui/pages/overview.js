// Overview: the cluster's nodes (up or down and since when, Raft role, controller, queue
// leaders, alarms), totals, listeners, and charts of message rates and queued messages.

import {h, fill, section} from '../dom.js';
import * as fmt from '../format.js';
import {plainTable} from '../table.js';
import {LineChart} from '../chart.js';
import {
  MESSAGE_RATES, chartSeries, getSampled, lengthSpecs, present, rateSpecs,
} from '../samples.js';

const RATES = rateSpecs(MESSAGE_RATES);
const LENGTHS = lengthSpecs((answer) => answer?.queue_totals);

const status = (node) => node.status;

/** When the node went up or down (the cluster's since_ms). */
function since(node, nowMs) {
  const at = node.since_ms;
  return at ? `${fmt.time(at)} (${fmt.duration(nowMs - at)} ago)` : '';
}

// Another node's alarms, when it did not answer (or the broker does not ask): unknown.
const UNKNOWN = () => h('span', {class: 'muted', title: 'shown by that node itself'}, '–');

function yesNo(flag, yes = 'yes') {
  return flag ? h('span', {class: 'badge bad'}, yes) : 'no';
}

function nodeColumns(nowMs) {
  return [
    {key: 'name', label: 'Node', value: (n) => n.name},
    {key: 'status', label: 'Status', value: status, render: (n) => h('span',
      {class: `badge ${status(n) === 'up' ? 'good' : 'bad'}`, 'data-status': status(n)},
      status(n))},
    {key: 'since', label: 'Since', value: (n) => since(n, nowMs)},
    {key: 'role', label: 'Raft role', value: (n) => n.role},
    {key: 'controller', label: 'Controller', value: (n) => (n.controller ? 'controller' : ''),
      render: (n) => (n.controller ? h('span', {class: 'badge info'}, 'controller') : '')},
    {key: 'queue_leaders', label: 'Queue leaders', numeric: true,
      value: (n) => n.queue_leaders},
    {key: 'mem_alarm', label: 'Memory alarm', value: (n) => n.mem_alarm,
      render: (n) => (n.mem_alarm == null ? UNKNOWN() : yesNo(n.mem_alarm, 'ALARM'))},
    {key: 'disk_free_alarm', label: 'Disk alarm', value: (n) => n.disk_free_alarm,
      render: (n) => (n.disk_free_alarm == null ? UNKNOWN()
        : yesNo(n.disk_free_alarm, 'ALARM'))},
  ];
}

const LISTENERS = [
  {key: 'node', label: 'Node', value: (l) => l.node},
  {key: 'protocol', label: 'Protocol', value: (l) => l.protocol},
  {key: 'ip', label: 'Address', value: (l) => l.ip_address},
  {key: 'port', label: 'Port', numeric: true, value: (l) => l.port},
];

function totals(overview) {
  const q = overview.queue_totals ?? {};
  const o = overview.object_totals ?? {};
  const tiles = [
    ['Ready', fmt.count(q.messages_ready)], ['Unacked', fmt.count(q.messages_unacknowledged)],
    ['Total', fmt.count(q.messages)], ['Queues', fmt.count(o.queues)],
    ['Exchanges', fmt.count(o.exchanges)], ['Connections', fmt.count(o.connections)],
    ['Channels', fmt.count(o.channels)], ['Consumers', fmt.count(o.consumers)],
  ];
  return h('div', {class: 'tiles'}, tiles.map(([label, value]) => h('div',
    {class: 'tile', 'data-total': label.toLowerCase()},
    h('span', {class: 'tile-value'}, value), h('span', {class: 'tile-label'}, label))));
}

export function create({api, session, history}) {
  const rates = new LineChart('Message rates', fmt.rate);
  const lengths = new LineChart('Queued messages', fmt.count);
  const heading = h('p', {class: 'muted'});
  const totalsBox = h('div');
  const nodesBox = h('div', {id: 'nodes'});
  const listenersBox = h('div');
  const element = h('div', {class: 'page', 'data-page': 'overview'},
    h('h1', {}, 'Overview'), heading, totalsBox,
    section('Charts', h('div', {class: 'charts'}, rates.element, lengths.element)),
    section('Nodes', nodesBox), section('Listeners', listenersBox));

  async function refresh() {
    const nowMs = Date.now();
    const [overview, nodes] = await Promise.all([
      getSampled(api, '/api/overview'),
      session.seesNodes ? api.get('/api/nodes') : Promise.resolve(null),
    ]);
    const unknown = overview.queues_unknown ? ` The leaders of ${overview.queues_unknown} `
      + 'queue(s) did not answer: their messages are not in the totals.' : '';
    fill(heading, `Cluster ${overview.cluster_name}, answered by node ${overview.node} `
      + `(${overview.product_name} ${overview.product_version}).${unknown}`);
    fill(totalsBox, totals(overview));
    rates.draw(chartSeries(overview, present(RATES, overview), history, 'overview', nowMs));
    lengths.draw(chartSeries(overview, LENGTHS, history, 'overview', nowMs));
    fill(nodesBox, nodes === null
      ? h('p', {class: 'muted'}, 'The nodes are shown to users tagged monitoring or administrator.')
      : plainTable(nodeColumns(nowMs), nodes, (n) => n.name, 'nodes'));
    fill(listenersBox, plainTable(LISTENERS, overview.listeners ?? [],
      (l) => `${l.node}:${l.protocol}`, 'listeners'));
  }

  return {element, refresh};
}
