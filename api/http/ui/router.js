// Hash routing: `#/queues/%2F/orders` names the queue page of queue "orders" in vhost "/".
// Segments are percent-encoded, so any vhost or name survives the trip.

const ROUTES = [
  ['overview', []], ['queues', []], ['queues', ['vhost', 'name'], 'queue'],
  ['exchanges', []], ['exchanges', ['vhost', 'name'], 'exchange'],
  ['connections', []], ['channels', []], ['admin', []],
];

/** {page, params, section} for a location hash; the overview for anything unknown. */
export function parse(hash) {
  const parts = hash.replace(/^#\/?/, '').split('/').filter((p) => p !== '');
  const [first = 'overview', ...rest] = parts;
  for (const [section, names, page] of ROUTES) {
    if (section === first && names.length === rest.length) {
      const params = Object.fromEntries(names.map((n, i) => [n, safeDecode(rest[i])]));
      return {page: page ?? section, section, params};
    }
  }
  return {page: 'overview', section: 'overview', params: {}};
}

function safeDecode(part) {
  try { return decodeURIComponent(part); } catch { return part; }
}

/** The hash of a page: link('queues', vhost, name). */
export function link(section, ...names) {
  return `#/${[section, ...names.map((n) => encodeURIComponent(n))].join('/')}`;
}
