import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

type Doc = { paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema: object }> }> }>> };

/**
 * Checks response bodies against the schemas `/openapi.json` documents for them, so a test
 * suite proves the document tells the truth about what it received.
 */
export function openApiValidator(doc: Doc) {
  const ajv = new (Ajv2020 as unknown as typeof Ajv2020.default)({ strict: false, allErrors: true });
  (addFormats as unknown as (a: unknown) => void)(ajv);
  const cache = new Map<string, ReturnType<typeof ajv.compile>>();
  let checked = 0;
  return {
    /** Returns the list of schema errors (empty when the body conforms). Throws when nothing is documented. */
    check(method: string, pathTemplate: string, status: number, body: unknown): string[] {
      const key = `${method} ${pathTemplate} ${status}`;
      let validate = cache.get(key);
      if (!validate) {
        const op = doc.paths[pathTemplate]?.[method.toLowerCase()];
        if (!op) throw new Error(`${method} ${pathTemplate} is not documented`);
        const schema = op.responses[String(status)]?.content?.['application/json']?.schema;
        if (!schema) throw new Error(`${key}: no documented JSON schema`);
        validate = ajv.compile(schema);
        cache.set(key, validate);
      }
      checked++;
      return validate(body) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message}`);
    },
    get checked() {
      return checked;
    },
  };
}
