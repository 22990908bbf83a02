import { type ConfigurationOptions, Observable, type ObservableMiddleware, type RequestContext, type ResponseContext } from '@kubernetes/client-node';

/**
 * Request options for a client-node call that gives up after `ms` (an AbortError): the client
 * sets no timeout of its own, so a call to an API server that accepts the connection and never
 * answers would wait for ever. (The API classes take observable middleware, as setHeaderOptions
 * builds it.)
 */
export function requestTimeout(ms: number): ConfigurationOptions<ObservableMiddleware> {
  return {
    middleware: [
      {
        pre: (context: RequestContext) => {
          context.setSignal(AbortSignal.timeout(ms));
          return new Observable(Promise.resolve(context));
        },
        post: (response: ResponseContext) => new Observable(Promise.resolve(response)),
      },
    ],
    middlewareMergeStrategy: 'append',
  };
}
