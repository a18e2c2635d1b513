// Connections: client properties, state (running, flow, blocked...), rates; closing one
// with a reason (DELETE /api/connections/{name}, the reason in X-Reason).

import {h, field} from '../dom.js';
import {DataTable} from '../table.js';
import {apiPath} from '../api.js';
import * as fmt from '../format.js';
import {perform} from './actions.js';

/** The client's product and version; its platform (often a long build string) on hover. */
function client(c) {
  const p = c.client_properties ?? {};
  return [p.product, p.version].filter(Boolean).join(' ') || p.connection_name || '';
}

function columns() {
  return [
    {key: 'name', label: 'Name', value: (c) => c.name},
    {key: 'node', label: 'Node', value: (c) => c.node},
    {key: 'user', label: 'User', value: (c) => c.user},
    {key: 'vhost', label: 'Vhost', value: (c) => c.vhost},
    {key: 'protocol', label: 'Protocol', value: (c) => c.protocol},
    {key: 'client', label: 'Client', value: client,
      render: (c) => h('span', {title: c.client_properties?.platform ?? ''}, client(c))},
    {key: 'state', label: 'State', value: (c) => c.state,
      render: (c) => h('span', {class: `badge ${c.state === 'running' ? 'good' : 'warn'}`},
        c.state ?? '')},
    {key: 'ssl', label: 'TLS', value: (c) => (c.ssl ? 'yes' : 'no')},
    {key: 'channels', label: 'Channels', numeric: true, value: (c) => c.channels},
    {key: 'recv', label: 'From client', numeric: true, value: (c) => c.recv_oct_details?.rate,
      render: (c) => (c.recv_oct_details ? `${fmt.bytes(c.recv_oct_details.rate)}/s` : '')},
    {key: 'send', label: 'To client', numeric: true, value: (c) => c.send_oct_details?.rate,
      render: (c) => (c.send_oct_details ? `${fmt.bytes(c.send_oct_details.rate)}/s` : '')},
    {key: 'connected_at', label: 'Connected', value: (c) => fmt.time(c.connected_at)},
  ];
}

function closeForm(api, onClosed) {
  const note = h('p', {class: 'note'});
  const name = h('input', {name: 'name', required: true, class: 'wide',
    placeholder: 'connection name (from the table)'});
  const reason = h('input', {name: 'reason', value: 'Closed via management UI', class: 'wide'});
  const form = h('form', {class: 'inline-form', 'data-form': 'close-connection'},
    field('Connection', name), field('Reason', reason),
    h('button', {type: 'submit', class: 'danger'}, 'Close connection'), note);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const closed = await perform(note, () => api.del(apiPath('connections', name.value),
      {'X-Reason': reason.value}).then(() => true), `Connection '${name.value}' closed.`);
    if (closed) onClosed();
  });
  return {form, choose: (connection) => { name.value = connection; reason.focus(); }};
}

export function create({api, session}) {
  // Redrawn at once after a close, not at the next tick (the row may still show until
  // the client has answered the close; the tick after that drops it).
  const closer = session.readOnly ? null : closeForm(api, () => refresh().catch(() => {}));
  const cols = columns();
  if (closer) {
    cols.push({key: 'close', label: '', value: () => '', render: (c) => h('button',
      {type: 'button', onclick: () => closer.choose(c.name)}, 'Close…')});
  }
  const table = new DataTable({columns: cols, rowKey: (c) => c.name, sortKey: 'name',
    name: 'connections', empty: 'No connections.'});
  const refresh = async () => table.setRows(await api.get('/api/connections'));
  const element = h('div', {class: 'page', 'data-page': 'connections'},
    h('h1', {}, 'Connections'), table.element,
    closer && h('section', {class: 'panel'}, h('h2', {}, 'Close a connection'), closer.form));
  return {element, refresh};
}
