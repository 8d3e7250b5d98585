import { describe, expect, it } from 'vitest';
import { bindingBody, bindingErrors, bindingRowOf, describeBinding, emptyBindingRow, serverBindingErrors, type BindingRow, type SecretBinding } from './secretBindings';

const row = (patch: Partial<BindingRow>): BindingRow => ({ ...emptyBindingRow(), secret: 'GH', ...patch });

describe('secret binding rows', () => {
  it('round-trip each of the three forms the API answers with', () => {
    const answers: SecretBinding[] = [
      { secret: 'GH', env: 'TOKEN' },
      { secret: 'GH', env: '', inject: { host: 'api.github.com', header: 'Authorization', format: 'Bearer {value}' } },
      { secret: 'GH', env: 'GITHUB_TOKEN', placeholder: { env: 'GITHUB_TOKEN', hosts: ['api.github.com', 'uploads.github.com'] } },
    ];
    const bodies = answers.map((b) => bindingBody(bindingRowOf(b)));
    expect(bodies).toEqual([
      { secret: 'GH', env: 'TOKEN' },
      { secret: 'GH', inject: { host: 'api.github.com', header: 'Authorization', format: 'Bearer {value}' } },
      { secret: 'GH', placeholder: { env: 'GITHUB_TOKEN', hosts: ['api.github.com', 'uploads.github.com'] } },
    ]);
    expect(bodies.every((b) => !('inject' in b && 'placeholder' in b))).toBe(true);
  });

  it('send only the chosen kind’s fields, whatever the others hold', () => {
    const r = row({ kind: 'inject', env: 'LEFT_OVER', host: ' a.test ', header: 'X-Key', hosts: 'b.test' });
    expect(bindingBody(r)).toEqual({ secret: 'GH', inject: { host: 'a.test', header: 'X-Key', format: '{value}' } });
    expect(bindingBody({ ...r, kind: 'placeholder', env: 'T', hosts: 'a.test,  b.test c.test' })).toEqual({ secret: 'GH', placeholder: { env: 'T', hosts: ['a.test', 'b.test', 'c.test'] } });
  });

  it('check an inject binding’s host, header and format at their fields', () => {
    const e = bindingErrors([row({ kind: 'inject', host: 'https://a.test:443', header: 'Bad Header', format: 'Bearer' })]);
    expect(e['secret_bindings.0.inject.host']).toMatch(/no scheme, port/);
    expect(e['secret_bindings.0.inject.header']).toMatch(/header name/);
    expect(e['secret_bindings.0.inject.format']).toMatch(/\{value\} exactly once/);
    expect(bindingErrors([row({ kind: 'inject', host: 'a.test', header: 'X', format: '{value}{value}' })])['secret_bindings.0.inject.format']).toBeTruthy();
    // An inject binding has no variable: an empty env is no error.
    expect(bindingErrors([row({ kind: 'inject', host: 'api.github.com', header: 'Authorization', format: 'Bearer {value}' })])).toEqual({});
  });

  it('check a placeholder’s variable and hosts, and count its variable against the others', () => {
    const e = bindingErrors([row({ env: 'TOKEN' }), row({ kind: 'placeholder', env: 'TOKEN', hosts: '' }), row({ kind: 'placeholder', env: '1X', hosts: 'ok.test, *.bad.test' })]);
    expect(e['secret_bindings.1.env']).toMatch(/Duplicate/);
    expect(e['secret_bindings.1.placeholder.hosts']).toMatch(/1 to 16/);
    expect(e['secret_bindings.2.env']).toMatch(/Letters/);
    expect(e['secret_bindings.2.placeholder.hosts']).toMatch(/\*\.bad\.test/);
    expect(bindingErrors([row({ kind: 'placeholder', env: 'T', hosts: Array.from({ length: 17 }, (_, i) => `h${i}.test`).join(',') })])['secret_bindings.0.placeholder.hosts']).toMatch(/16/);
  });

  it('put the server’s 422s beside the field the form shows', () => {
    expect(
      serverBindingErrors({
        'secret_bindings.0.inject.header': "'Host' is Host or a hop-by-hop header",
        'secret_bindings.1.placeholder.env': 'bad var',
        'secret_bindings.1.placeholder.hosts.2': 'bad host',
        'secret_bindings.2': 'not both',
        network: 'elsewhere',
      }),
    ).toEqual({
      'secret_bindings.0.inject.header': "'Host' is Host or a hop-by-hop header",
      'secret_bindings.1.env': 'bad var',
      'secret_bindings.1.placeholder.hosts': 'bad host',
      'secret_bindings.2.secret': 'not both',
    });
  });

  it('describe a binding by where the secret goes', () => {
    expect(describeBinding({ secret: 'GH', env: 'TOKEN' })).toBe('TOKEN ← GH');
    expect(describeBinding({ secret: 'GH', env: '', inject: { host: 'api.github.com', header: 'Authorization', format: 'Bearer {value}' } })).toMatch(/^GH → header Authorization: Bearer \{value\} on api\.github\.com/);
    expect(describeBinding({ secret: 'GH', env: 'GITHUB_TOKEN', placeholder: { env: 'GITHUB_TOKEN', hosts: ['api.github.com'] } })).toMatch(/^GITHUB_TOKEN ← placeholder for GH, swapped on api\.github\.com/);
  });
});
