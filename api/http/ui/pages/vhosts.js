// The vhosts the user may see, for the forms' vhost choice.

import {select} from '../dom.js';

export async function vhostSelect(api, name = 'vhost') {
  let vhosts = [];
  try {
    vhosts = (await api.get('/api/vhosts')).map((v) => v.name);
  } catch {
    vhosts = ['/'];
  }
  return select(name, vhosts.map((v) => [v, v]), vhosts.includes('/') ? '/' : vhosts[0]);
}
