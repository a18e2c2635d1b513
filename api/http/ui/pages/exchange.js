// An exchange's page: its properties, the bindings it is the source of (out) and the
// destination of (in), publishing to it, and deleting it.

import {h, fill, facts, section, confirmButton} from '../dom.js';
import {apiPath} from '../api.js';
import {plainTable} from '../table.js';
import {link} from '../router.js';
import * as fmt from '../format.js';
import {perform} from './actions.js';
import {publishForm} from './message_forms.js';
import {bindingForm, unbindButton} from './bindings.js';
import {LineChart} from '../chart.js';
import {chartSeries, getSampled, rateSpecs} from '../samples.js';

const DEFAULT = 'amq.default';
const RATES = rateSpecs([['in', 'publish_in'], ['out', 'publish_out']]);

function endLink(vhost, kind, name) {
  if (kind === 'queue') return h('a', {href: link('queues', vhost, name)}, name);
  return h('a', {href: link('exchanges', vhost, name || DEFAULT)}, name || '(AMQP default)');
}

const OUT = [
  {key: 'destination', label: 'To', value: (b) => b.destination,
    render: (b) => endLink(b.vhost, b.destination_type, b.destination)},
  {key: 'type', label: 'Kind', value: (b) => b.destination_type},
  {key: 'routing_key', label: 'Routing key', value: (b) => b.routing_key},
  {key: 'arguments', label: 'Arguments', value: (b) => fmt.json(b.arguments)},
];
const IN = [
  {key: 'source', label: 'From', value: (b) => b.source,
    render: (b) => endLink(b.vhost, 'exchange', b.source)},
  {key: 'routing_key', label: 'Routing key', value: (b) => b.routing_key},
  {key: 'arguments', label: 'Arguments', value: (b) => fmt.json(b.arguments)},
];

export function create({api, session, history}, {vhost, name}) {
  const rates = new LineChart('Message rates', fmt.rate);
  const exchangeName = name === DEFAULT ? '' : name;
  const factsBox = h('div');
  const outBox = h('div');
  const inBox = h('div');
  const note = h('p', {class: 'note'});
  const writable = !session.readOnly;
  const bindNote = h('p', {class: 'note'});
  const again = () => refresh().catch(() => {});
  const unbind = writable ? [{key: 'unbind', label: '', value: () => '',
    render: (b) => unbindButton(api, b, bindNote, again)}] : [];
  let shownBindings = null;
  const element = h('div', {class: 'page', 'data-page': 'exchange'},
    h('h1', {}, `Exchange ${exchangeName || '(AMQP default)'}`,
      h('span', {class: 'muted'}, ` in vhost ${vhost}`)),
    section('Details', factsBox),
    section('Charts', h('div', {class: 'charts'}, rates.element)),
    section('Bindings from this exchange', outBox,
      writable && exchangeName && bindingForm(api, vhost, {source: exchangeName}, bindNote, again),
      bindNote),
    section('Bindings to this exchange', inBox),
    writable && section('Publish a message', publishForm(api, vhost, exchangeName, '')),
    writable && exchangeName && !exchangeName.startsWith('amq.') && section('Delete',
      confirmButton('Delete', async () => {
        const done = await perform(note, () => api.del(apiPath('exchanges', vhost, name)),
          'Exchange deleted.');
        if (done !== undefined) location.hash = link('exchanges');
      }, {'data-action': 'delete'}), note));

  async function refresh() {
    const nowMs = Date.now();
    const [exchange, bindings] = await Promise.all([
      getSampled(api, apiPath('exchanges', vhost, name)), api.get(apiPath('bindings', vhost))]);
    rates.draw(chartSeries(exchange, RATES, history, `exchange ${vhost} ${name}`, nowMs));
    fill(factsBox, facts([['Type', exchange.type], ['Durable', exchange.durable ? 'yes' : 'no'],
      ['Auto-delete', exchange.auto_delete ? 'yes' : 'no'],
      ['Internal', exchange.internal ? 'yes' : 'no'],
      ['Arguments', h('code', {}, fmt.json(exchange.arguments))],
      ['Policy', exchange.policy ?? '']]));
    const key = (b) => `${b.source}/${b.destination_type}/${b.destination}/${b.properties_key}`;
    const out = bindings.filter((b) => b.source === exchangeName);
    const into = bindings.filter((b) => b.destination_type === 'exchange'
      && b.destination === exchangeName);
    const text = JSON.stringify([out, into]);
    if (text === shownBindings) return;  // redrawn on change only: an armed Unbind stays
    shownBindings = text;
    fill(outBox, plainTable([...OUT, ...unbind], out, key, 'out'));
    fill(inBox, plainTable([...IN, ...unbind], into, key, 'in'));
  }

  return {element, refresh};
}
