// Channels: per channel its connection, state, prefetch, unacked messages, consumers,
// confirm / transactional mode and rates (GET /api/channels).

import {h, fill} from '../dom.js';
import {DataTable} from '../table.js';
import * as fmt from '../format.js';

const rateColumn = (key, label, stat) => ({key, label, numeric: true,
  value: (c) => fmt.statRate(c.message_stats, stat),
  render: (c) => fmt.rate(fmt.statRate(c.message_stats, stat))});

const COLUMNS = [
  {key: 'name', label: 'Channel', value: (c) => c.name},
  {key: 'connection', label: 'Connection', value: (c) => c.connection_details?.name},
  {key: 'node', label: 'Node', value: (c) => c.node},
  {key: 'user', label: 'User', value: (c) => c.user},
  {key: 'vhost', label: 'Vhost', value: (c) => c.vhost},
  {key: 'state', label: 'State', value: (c) => c.state},
  {key: 'mode', label: 'Mode', value: (c) => [c.confirm && 'confirm',
    c.transactional && 'tx'].filter(Boolean).join(', ')},
  {key: 'prefetch', label: 'Prefetch', numeric: true,
    value: (c) => c.prefetch_count ?? c.global_prefetch_count},
  {key: 'unacked', label: 'Unacked', numeric: true, value: (c) => c.messages_unacknowledged},
  {key: 'consumers', label: 'Consumers', numeric: true, value: (c) => c.consumer_count},
  rateColumn('publish', 'Publish', 'publish'), rateColumn('deliver', 'Deliver', 'deliver_get'),
  rateColumn('ack', 'Ack', 'ack'),
];

export function create({api}) {
  const table = new DataTable({columns: COLUMNS, rowKey: (c) => c.name, sortKey: 'name',
    name: 'channels', empty: 'No channels.'});
  const note = h('p', {class: 'muted'});
  const element = h('div', {class: 'page', 'data-page': 'channels'},
    h('h1', {}, 'Channels'), note, table.element);

  async function refresh() {
    try {
      table.setRows(await api.get('/api/channels'));
      fill(note);
    } catch (error) {
      if (error.status !== 404) throw error;
      fill(note, 'This broker does not list channels (no /api/channels): see Connections.');
    }
  }

  return {element, refresh};
}
