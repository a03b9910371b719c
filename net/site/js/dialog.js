// The confirmation of a destructive action: a modal <dialog> naming what goes.

import { h } from './dom.js';
import { field } from './forms.js';
import { onLeave } from './lifecycle.js';

/**
 * A modal confirmation: {title, text, yes (the button's words), typed (optional: a text the
 * user must type first, for what cannot be taken back)}. Resolves true when confirmed;
 * Cancel, Escape or leaving the page resolve false.
 */
export function confirmDialog(o) {
  return new Promise((resolve) => {
    const yes = h('button', { type: 'button', class: 'danger', testid: 'confirm-yes', text: o.yes });
    const no = h('button', { type: 'button', class: 'secondary', testid: 'confirm-no', text: 'Cancel' });
    let typed = null;
    if (o.typed) {
      typed = field('Type ' + o.typed + ' to confirm', 'confirm', 'text', { testid: 'confirm-typed' });
      yes.disabled = true;
      typed.input.addEventListener('input', () => { yes.disabled = typed.input.value.trim() !== o.typed; });
    }
    const dlg = h('dialog', { class: 'confirm', testid: 'confirm', 'aria-labelledby': 'confirm-h', 'aria-describedby': 'confirm-p' },
      h('h2', { id: 'confirm-h', text: o.title }), h('p', { id: 'confirm-p', testid: 'confirm-text', text: o.text }),
      typed ? typed.wrap : null, h('div', { class: 'actions' }, no, yes));
    let answer = false;
    yes.addEventListener('click', () => { answer = true; dlg.close(); });
    no.addEventListener('click', () => dlg.close());
    dlg.addEventListener('close', () => { dlg.remove(); resolve(answer); });
    onLeave(() => { if (dlg.open) dlg.close(); });
    document.body.append(dlg);
    dlg.showModal();
    (typed ? typed.input : no).focus();
  });
}
