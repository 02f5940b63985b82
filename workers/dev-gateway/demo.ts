export function demo(_req: Request, _env: unknown): Promise<Response> {
  return Promise.resolve(new Response("demo", { status: 404 }));
}
