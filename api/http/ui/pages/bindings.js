// Adding and removing bindings (queue and exchange pages): POST and DELETE under
// /api/bindings/{vhost}/e/{source}/{q|e}/{destination}[/{properties_key}].

import {h, field, formValues, select, confirmButton} from '../dom.js';
import {apiPath} from '../api.js';
import {perform, parseJsonObject} from './actions.js';

const KIND = {queue: 'q', exchange: 'e'};

function bindingPath(vhost, source, kind, destination) {
  return apiPath('bindings', vhost, 'e', source, KIND[kind], destination);
}

/** Unbind: the binding's properties_key is already escaped as a path segment. */
export function unbindButton(api, binding, note, after) {
  if (!binding.source) return '';  // the default exchange's bindings cannot be removed
  return confirmButton('Unbind', async () => {
    await perform(note, () => api.del(`${bindingPath(binding.vhost, binding.source,
      binding.destination_type, binding.destination)}/${binding.properties_key}`), 'Unbound.');
    after();
  }, {'data-action': 'unbind'});
}

/**
 * A form binding to `fixed` ({source} or {destination, kind}): the other end is typed in.
 */
export function bindingForm(api, vhost, fixed, note, after) {
  const fromSource = fixed.source !== undefined;
  const form = h('form', {class: 'inline-form', 'data-form': 'bind'},
    fromSource ? [field('To', select('kind', [['queue', 'queue'], ['exchange', 'exchange']],
      'queue')), field('Name', h('input', {name: 'other', required: true}))]
      : field('From exchange', h('input', {name: 'other', required: true})),
    field('Routing key', h('input', {name: 'routing_key'})),
    field('Arguments (JSON)', h('input', {name: 'arguments'})),
    h('button', {type: 'submit'}, 'Bind'));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const v = formValues(form);
    const [source, kind, destination] = fromSource ? [fixed.source, v.kind, v.other]
      : [v.other, fixed.kind, fixed.destination];
    await perform(note, async () => api.post(bindingPath(vhost, source, kind, destination),
      {routing_key: v.routing_key, arguments: parseJsonObject(v.arguments, 'arguments')}),
    'Bound.');
    after();
  });
  return form;
}
