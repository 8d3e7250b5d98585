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
});
