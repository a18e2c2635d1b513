// Building the page from data with the DOM API: text always goes in as text nodes,
// never as HTML, so names and payloads from the broker cannot inject markup.

/** An element: h('a', {href: '#/'}, 'text', child, [more children]). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else if (value === true) el.setAttribute(key, '');
    else el.setAttribute(key, String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replace an element's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** A section with a heading. */
export function section(title, ...children) {
  return h('section', {class: 'panel'}, h('h2', {}, title), ...children);
}

/** A definition list of [label, value] pairs (values may be nodes). */
export function facts(pairs) {
  return h('dl', {class: 'facts'},
    pairs.flatMap(([label, value]) => [h('dt', {}, label), h('dd', {}, value ?? '')]));
}

/** A status line under a form: ok (green) or error (red). */
export function message(el, text, ok) {
  el.className = ok ? 'note ok' : 'note error';
  el.textContent = text;
}

/** A form's named fields as an object of strings (checkboxes as booleans). */
export function formValues(form) {
  const out = {};
  for (const el of form.elements) {
    if (!el.name) continue;
    out[el.name] = el.type === 'checkbox' ? el.checked : el.value;
  }
  return out;
}

/** A labelled input. */
export function field(label, input) {
  return h('label', {class: 'field'}, h('span', {}, label), input);
}

/** A select of [value, label] options. */
export function select(name, options, selected) {
  return h('select', {name},
    options.map(([value, label]) => h('option', {value, selected: value === selected}, label)));
}

/** A button that asks again before it acts: the first click arms it for 5 s. */
export function confirmButton(label, action, attrs = {}) {
  const button = h('button', {type: 'button', class: 'danger', ...attrs}, label);
  let armed = null;
  button.addEventListener('click', async () => {
    if (armed === null) {
      button.textContent = `Confirm: ${label.toLowerCase()}`;
      armed = setTimeout(() => { armed = null; button.textContent = label; }, 5000);
      return;
    }
    clearTimeout(armed);
    armed = null;
    button.textContent = label;
    await action();
  });
  return button;
}
