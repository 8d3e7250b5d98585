import { fireEvent, screen, within } from '@testing-library/react';
import { useState } from 'react';
import { describe, expect, it, vi } from 'vitest';
import type { NetworkErrors, NetworkPolicy } from '../lib/network';
import { renderInApp } from '../test/render';
import { NetworkPolicyEditor } from './NetworkPolicyEditor';

/** The editor with its state held as a form would, reporting each change. */
function Harness({ initial, errors, onChange }: { initial: NetworkPolicy; errors?: NetworkErrors; onChange?: (p: NetworkPolicy) => void }) {
  const [value, setValue] = useState(initial);
  return (
    <NetworkPolicyEditor
      value={value}
      errors={errors}
      onChange={(p) => {
        setValue(p);
        onChange?.(p);
      }}
    />
  );
}

describe('NetworkPolicyEditor', () => {
  it('shows no list for open, and says what open means', () => {
    renderInApp(<Harness initial={{ egress: 'open', allow: [], presets: [] }} />);
    expect(screen.getByTestId('network-egress-help')).toHaveTextContent(/internet.*never private, host or cloud-metadata/);
    expect(screen.queryByTestId('network-allow')).toBeNull();
    expect(screen.getByTestId('network-policy')).toHaveTextContent(/must be allowed by its agent’s, its environment’s and its own policy/);
  });

  it('builds an allowlist from entries and presets', () => {
    const onChange = vi.fn();
    renderInApp(<Harness initial={{ egress: 'open', allow: [], presets: [] }} onChange={onChange} />);
    fireEvent.click(screen.getByRole('radio', { name: 'allowlist' }));
    expect(screen.getByTestId('network-note')).toHaveTextContent('An empty allowlist allows nothing');
    fireEvent.click(screen.getByRole('button', { name: 'Add entry' }));
    fireEvent.change(screen.getByLabelText('Allowed entry 1'), { target: { value: 'github.com:443' } });
    fireEvent.click(screen.getByRole('checkbox', { name: /^pypi/ }));
    expect(onChange).toHaveBeenLastCalledWith({ egress: 'allowlist', allow: ['github.com:443'], presets: ['pypi'] });
    expect(screen.queryByTestId('network-note')).toBeNull();
  });

  it('turns a pasted list into one row per entry', () => {
    const onChange = vi.fn();
    renderInApp(<Harness initial={{ egress: 'allowlist', allow: ['', 'z.org'], presets: [] }} onChange={onChange} />);
    fireEvent.paste(screen.getByLabelText('Allowed entry 1'), { clipboardData: { getData: () => 'b.org\nc.org, d.org' } });
    expect(onChange).toHaveBeenLastCalledWith({ egress: 'allowlist', allow: ['b.org', 'c.org', 'd.org', 'z.org'], presets: [] });
    expect(screen.getAllByTestId('network-entry')).toHaveLength(4);
    // Pasted into a filled row, the list goes after it.
    fireEvent.paste(screen.getByLabelText('Allowed entry 4'), { clipboardData: { getData: () => 'e.org f.org' } });
    expect(onChange).toHaveBeenLastCalledWith({ egress: 'allowlist', allow: ['b.org', 'c.org', 'd.org', 'z.org', 'e.org', 'f.org'], presets: [] });
  });

  it('hints the server’s rule beside an entry it would refuse, and notes the rest', () => {
    renderInApp(<Harness initial={{ egress: 'allowlist', allow: ['*.com', '*.example.com'], presets: [] }} />);
    const [bad, wildcard] = screen.getAllByTestId('network-entry');
    expect(within(bad).getByTestId('network-entry-hint')).toHaveTextContent("'*.com' is not an entry");
    expect(within(wildcard).getByTestId('network-entry-note')).toHaveTextContent('not example.com itself');
  });

  it('puts the server’s message beside the entry it names', () => {
    const errors = { 'allow.1': "'bad_' is refused by the server", presets: "unknown preset 'nope'" };
    renderInApp(<Harness initial={{ egress: 'allowlist', allow: ['a.org', 'ok.org'], presets: [] }} errors={errors} />);
    const rows = screen.getAllByTestId('network-entry');
    expect(within(rows[1]).getByTestId('network-entry-error')).toHaveTextContent("'bad_' is refused by the server");
    expect(screen.getByLabelText('Allowed entry 2')).toHaveAttribute('aria-invalid', 'true');
    expect(screen.getByLabelText('Allowed entry 1')).not.toHaveAttribute('aria-invalid', 'true');
    expect(screen.getByText("unknown preset 'nope'")).toBeInTheDocument();
  });

  it('says that leaving the allowlist clears it on save, and keeps it meanwhile', () => {
    const onChange = vi.fn();
    renderInApp(<Harness initial={{ egress: 'allowlist', allow: ['a.org'], presets: ['npm'] }} onChange={onChange} />);
    fireEvent.click(screen.getByRole('radio', { name: 'none' }));
    expect(screen.getByTestId('network-note')).toHaveTextContent('With none, the entries and presets below are not used: saving clears them.');
    expect(onChange).toHaveBeenLastCalledWith({ egress: 'none', allow: ['a.org'], presets: ['npm'] });
    fireEvent.click(screen.getByRole('radio', { name: 'allowlist' }));
    expect(screen.getByLabelText('Allowed entry 1')).toHaveValue('a.org');
  });

  it('says a preset is already in a chosen group', () => {
    renderInApp(<Harness initial={{ egress: 'allowlist', allow: [], presets: ['package_managers'] }} />);
    expect(screen.getByTestId('network-presets')).toHaveTextContent('registry.npmjs.org, registry.yarnpkg.com (in package_managers, which is chosen).');
  });
});
