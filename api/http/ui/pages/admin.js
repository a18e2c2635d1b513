// Admin: users, vhosts, permissions (administrators), policies, definitions export and
// import (administrators), federation upstreams and the status of their links.

import {h, field, select, section, message} from '../dom.js';
import {apiPath} from '../api.js';
import * as fmt from '../format.js';
import {listSection} from './admin_section.js';
import {parseJsonObject, perform} from './actions.js';

const input = (name, attrs = {}) => h('input', {name, ...attrs});

const USERS = {
  name: 'users', title: 'Users', path: '/api/users', rowKey: (u) => u.name,
  columns: [{key: 'name', label: 'Name', value: (u) => u.name},
    {key: 'tags', label: 'Tags', value: (u) => fmt.names(u.tags)}],
  remove: (api, u) => api.del(apiPath('users', u.name)),
  fields: [field('Name', input('name', {required: true})),
    field('Password', input('password', {type: 'password', required: true})),
    field('Tags', input('tags', {placeholder: 'management, monitoring, administrator'}))],
  button: 'Add or update user', done: 'User saved.',
  submit: (api, v) => api.put(apiPath('users', v.name), {password: v.password, tags: v.tags}),
};

const VHOSTS = {
  name: 'vhosts', title: 'Virtual hosts', path: '/api/vhosts', rowKey: (v) => v.name,
  columns: [{key: 'name', label: 'Name', value: (v) => v.name},
    {key: 'description', label: 'Description', value: (v) => v.description ?? ''}],
  remove: (api, v) => api.del(apiPath('vhosts', v.name)),
  fields: [field('Name', input('name', {required: true}))],
  button: 'Add vhost', done: 'Vhost added.',
  submit: (api, v) => api.put(apiPath('vhosts', v.name), {}),
};

const PERMISSIONS = {
  name: 'permissions', title: 'Permissions', path: '/api/permissions',
  rowKey: (p) => `${p.vhost}/${p.user}`,
  columns: ['user', 'vhost', 'configure', 'write', 'read'].map((key) => ({key,
    label: key[0].toUpperCase() + key.slice(1), value: (p) => p[key]})),
  remove: (api, p) => api.del(apiPath('permissions', p.vhost, p.user)),
  fields: [field('User', input('user', {required: true})),
    field('Vhost', input('vhost', {value: '/', required: true})),
    field('Configure', input('configure', {value: '.*'})),
    field('Write', input('write', {value: '.*'})), field('Read', input('read', {value: '.*'}))],
  button: 'Set permissions', done: 'Permissions set.',
  submit: (api, v) => api.put(apiPath('permissions', v.vhost, v.user),
    {configure: v.configure, write: v.write, read: v.read}),
};

function policies(writable) {
  return {
    name: 'policies', title: 'Policies', path: '/api/policies',
    rowKey: (p) => `${p.vhost}/${p.name}`,
    columns: [{key: 'vhost', label: 'Vhost', value: (p) => p.vhost},
      {key: 'name', label: 'Name', value: (p) => p.name},
      {key: 'pattern', label: 'Pattern', value: (p) => p.pattern},
      {key: 'apply-to', label: 'Apply to', value: (p) => p['apply-to']},
      {key: 'priority', label: 'Priority', numeric: true, value: (p) => p.priority},
      {key: 'definition', label: 'Definition', value: (p) => fmt.json(p.definition)}],
    ...(writable ? {
      remove: (api, p) => api.del(apiPath('policies', p.vhost, p.name)),
      fields: [field('Vhost', input('vhost', {value: '/', required: true})),
        field('Name', input('name', {required: true})),
        field('Pattern', input('pattern', {required: true, placeholder: '^orders$'})),
        field('Apply to', select('apply-to', [['all', 'all'], ['queues', 'queues'],
          ['exchanges', 'exchanges']], 'all')),
        field('Priority', input('priority', {type: 'number', value: 0})),
        field('Definition (JSON)', input('definition', {required: true, class: 'wide',
          placeholder: '{"message-ttl": 60000}'}))],
      button: 'Add or update policy', done: 'Policy saved.',
      submit: (api, v) => api.put(apiPath('policies', v.vhost, v.name), {
        pattern: v.pattern, 'apply-to': v['apply-to'], priority: Number(v.priority) || 0,
        definition: parseJsonObject(v.definition, 'definition')}),
    } : {}),
  };
}

/** An upstream's URI without its password. */
function safeUri(uri) {
  return String(uri ?? '').replace(/\/\/([^:@/]*):[^@/]*@/, '//$1:***@');
}

const UPSTREAMS = {
  name: 'upstreams', title: 'Federation upstreams', path: '/api/parameters/federation-upstream',
  rowKey: (p) => `${p.vhost}/${p.name}`,
  columns: [{key: 'vhost', label: 'Vhost', value: (p) => p.vhost},
    {key: 'name', label: 'Name', value: (p) => p.name},
    {key: 'uri', label: 'URI', value: (p) => fmt.names([].concat(p.value?.uri ?? []).map(safeUri))},
    {key: 'settings', label: 'Settings', value: (p) => {
      const {uri, ...rest} = p.value ?? {};
      return fmt.json(rest);
    }}],
};

const LINKS = {
  name: 'links', title: 'Federation links', path: '/api/federation-links',
  rowKey: (l) => `${l.vhost}/${l.upstream}/${l.exchange ?? l.queue}`,
  columns: [{key: 'vhost', label: 'Vhost', value: (l) => l.vhost},
    {key: 'upstream', label: 'Upstream', value: (l) => l.upstream},
    {key: 'type', label: 'Type', value: (l) => l.type},
    {key: 'local', label: 'Local', value: (l) => l.exchange ?? l.queue},
    {key: 'node', label: 'Node', value: (l) => l.node},
    {key: 'status', label: 'Status', value: (l) => l.status},
    {key: 'since', label: 'Since', value: (l) => fmt.time(l.timestamp)},
    {key: 'error', label: 'Error', value: (l) => l.error ?? ''}],
};

function definitions(api) {
  const note = h('p', {class: 'note'});
  const text = h('textarea', {name: 'definitions', rows: 5, class: 'wide',
    placeholder: 'Paste a definitions JSON document, or choose a file'});
  const file = h('input', {type: 'file', accept: '.json,application/json',
    onchange: async () => { if (file.files[0]) text.value = await file.files[0].text(); }});
  const exportButton = h('button', {type: 'button', onclick: () => perform(note, async () => {
    const document_ = await api.get('/api/definitions');
    const url = URL.createObjectURL(new Blob([JSON.stringify(document_, null, 2)],
      {type: 'application/json'}));
    const a = h('a', {href: url, download: 'logbroker-definitions.json'});
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  }, 'Definitions exported.')}, 'Export definitions');
  const importButton = h('button', {type: 'button', onclick: () => {
    let parsed;
    try {
      parsed = parseJsonObject(text.value, 'definitions');
    } catch (error) {
      message(note, error.message, false);
      return;
    }
    perform(note, () => api.post('/api/definitions', parsed), 'Definitions imported.');
  }}, 'Import definitions');
  return {element: section('Definitions', h('div', {class: 'actions'}, exportButton),
    h('div', {class: 'stack-form'}, file, text, importButton), note), refresh: async () => {}};
}

export function create({api, session}) {
  const parts = [];
  if (session.isAdmin) {
    parts.push(listSection(api, USERS), listSection(api, VHOSTS),
      listSection(api, PERMISSIONS));
  }
  parts.push(listSection(api, policies(session.maySetPolicies)));
  if (session.isAdmin) parts.push(definitions(api));
  parts.push(listSection(api, UPSTREAMS), listSection(api, LINKS));
  const element = h('div', {class: 'page', 'data-page': 'admin'}, h('h1', {}, 'Admin'),
    !session.isAdmin && h('p', {class: 'muted'},
      'Users, vhosts, permissions and definitions are for administrators.'),
    parts.map((p) => p.element));
  return {element, refresh: async () => { await Promise.all(parts.map((p) => p.refresh())); }};
}
