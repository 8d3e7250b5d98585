import { fireEvent, screen } from '@testing-library/react';
import { describe, expect, it, vi } from 'vitest';
import { renderInApp } from '../../test/render';
import { ConfigFields } from './ConfigFields';
import { emptyValues, validateConfig } from './environments';

describe('ConfigFields', () => {
  it('has one field per manager, in install order, and reports what is typed into it', () => {
    const onChange = vi.fn();
    const values = emptyValues();
    renderInApp(<ConfigFields values={values} errors={{}} onChange={onChange} />);
    const labels = screen.getAllByRole('textbox').map((t) => t.getAttribute('aria-label')).filter(Boolean);
    expect(labels).toEqual(['apt packages', 'cargo packages', 'gem packages', 'go packages', 'npm packages', 'pip packages']);
    fireEvent.change(screen.getByLabelText('pip packages'), { target: { value: 'six' } });
    expect(onChange).toHaveBeenCalledWith({ ...values, packages: { ...values.packages, pip: 'six' } });
  });

  it('shows a refused entry on its manager', () => {
    const values = { ...emptyValues(), packages: { ...emptyValues().packages, npm: '-g' } };
    renderInApp(<ConfigFields values={values} errors={validateConfig(values)} onChange={() => {}} />);
    expect(screen.getByText(/options are not accepted/)).toBeInTheDocument();
  });

  it('edits the network policy of the environment, with the server’s message beside an entry', () => {
    const onChange = vi.fn();
    const values = { ...emptyValues(), network: { egress: 'allowlist' as const, allow: ['a.org', 'b.org'], presets: [] } };
    renderInApp(<ConfigFields values={values} errors={{}} networkErrors={{ 'allow.1': 'refused here' }} onChange={onChange} />);
    expect(screen.getByLabelText('Allowed entry 2')).toHaveAttribute('aria-invalid', 'true');
    expect(screen.getByText('refused here')).toBeInTheDocument();
    fireEvent.click(screen.getByRole('radio', { name: 'none' }));
    expect(onChange).toHaveBeenCalledWith({ ...values, network: { ...values.network, egress: 'none' } });
  });
});
