// Forms shared by the queue and exchange pages: publish a message, and show messages
// (from a get or a replay) in a table.

import {h, field, formValues, select} from '../dom.js';
import {apiPath} from '../api.js';
import * as fmt from '../format.js';
import {plainTable} from '../table.js';
import {perform, parseJsonObject} from './actions.js';

/** Publish to exchange `exchange` ('' = the default); `routingKey` preset if given. */
export function publishForm(api, vhost, exchange, routingKey) {
  const note = h('p', {class: 'note'});
  const form = h('form', {class: 'stack-form', 'data-form': 'publish'},
    field('Routing key', h('input', {name: 'routing_key', value: routingKey ?? ''})),
    field('Delivery mode', select('delivery_mode', [['2', '2 - persistent'],
      ['1', '1 - non-persistent']], '2')),
    field('Headers (JSON)', h('input', {name: 'headers', placeholder: '{"k": "v"}'})),
    field('Properties (JSON)', h('input', {name: 'properties',
      placeholder: '{"content_type": "text/plain"}'})),
    field('Payload', h('textarea', {name: 'payload', rows: 4})),
    h('button', {type: 'submit'}, 'Publish message'), note);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const values = formValues(form);
    await perform(note, async () => {
      const properties = {...parseJsonObject(values.properties, 'properties'),
        delivery_mode: Number(values.delivery_mode)};
      const headers = parseJsonObject(values.headers, 'headers');
      if (Object.keys(headers).length) properties.headers = headers;
      return api.post(apiPath('exchanges', vhost, exchange || 'amq.default', 'publish'),
        {routing_key: values.routing_key, payload: values.payload,
          payload_encoding: 'string', properties});
    }, (result) => (result.routed ? 'Message published (routed).'
      : 'Message published, but not routed to any queue.'));
  });
  return form;
}

const MESSAGE_COLUMNS = [
  {key: 'offset', label: 'Offset', numeric: true, value: (m) => m.offset},
  {key: 'timestamp', label: 'Time', value: (m) => fmt.time(m.timestamp)},
  {key: 'redelivered', label: 'Redelivered', value: (m) => (m.redelivered ? 'yes' : '')},
  {key: 'exchange', label: 'Exchange', value: (m) => m.exchange},
  {key: 'routing_key', label: 'Routing key', value: (m) => m.routing_key},
  {key: 'properties', label: 'Properties', value: (m) => fmt.json(m.properties)},
  {key: 'payload', label: 'Payload', value: (m) => m.payload,
    render: (m) => h('code', {class: 'payload'}, m.payload_encoding === 'base64'
      ? `(base64) ${m.payload}` : m.payload)},
];

/** Messages as a table (the columns their answers have). */
export function messagesTable(messages, name) {
  const columns = MESSAGE_COLUMNS.filter((c) => messages.some((m) => m[c.key] !== undefined));
  return plainTable(columns, messages,
    (m) => String(m.offset ?? m.payload), name, 'No messages.');
}
