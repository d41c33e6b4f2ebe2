internal import HTTPTypes
internal import Hummingbird
internal import Synchronization
internal import WebAuthnCore

/// The paths the application serves, with the methods each answers: what tells an unknown path
/// (`404 not_found`) from a known one asked with another method (`405 method_not_allowed`, with
/// `Allow`). Filled while the routes are added, through ``RecordingRouter``; read when a request
/// matched no route. Both answers were an empty 404, the only refusal without the JSON envelope
/// and its code (red team, rounds 26 and 27).
final class RouteTable: Sendable {
    private struct Route {
        /// The path's components, matched as the router matches them (`:id` takes any segment).
        let path: RouterPath
        var methods: Set<HTTPRequest.Method>
    }
    private let routes = Mutex<[Route]>([])
    /// Paths left out of the table: a route that answers some clients as a path nothing serves
    /// (`/metrics`) answers every method so (re-check of round 27: POST got 405 with `Allow: GET`).
    let concealed: Set<String>

    init(concealing concealed: Set<String> = []) { self.concealed = concealed }

    func add(_ path: RouterPath, method: HTTPRequest.Method) {
        guard !concealed.contains(path.description) else { return }
        routes.withLock { routes in
            if let i = routes.firstIndex(where: { $0.path.description == path.description }) {
                routes[i].methods.insert(method)
            } else {
                routes.append(Route(path: path, methods: [method]))
            }
        }
    }

    /// The methods some route answers at `path`, HEAD wherever GET (the router makes those);
    /// empty when no route has this path.
    func methods(at path: String) -> Set<HTTPRequest.Method> {
        var methods = routes.withLock { routes in
            // Split no further than the longest route needs: a path with more segments matches
            // none (a path of 40,000 segments was split whole; re-check of round 27).
            let longest = routes.map(\.path.components.count).max() ?? 0
            let segments = path == "/" ? [] : path.split(separator: "/", maxSplits: longest + 1, omittingEmptySubsequences: false).dropFirst()
            return routes.filter { route in
                route.path.components.count == segments.count && zip(route.path.components, segments).allSatisfy { $0 ~= $1 }
            }.reduce(into: Set<HTTPRequest.Method>()) { $0.formUnion($1.methods) }
        }
        if methods.contains(.get) { methods.insert(.head) }
        return methods
    }

    /// The answer to a request no route took: 405 with `Allow` when the path is served with
    /// other methods, else 404; the failure envelope either way, without the path (a stranger's
    /// text, which the request line already logs). A HEAD request gets the status alone.
    func answer(to request: Request) -> Response {
        let allowed = CanonicalPathMiddleware<BasicRequestContext>.isCanonical(request.uri.path) ? methods(at: request.uri.path) : []
        var response: Response
        // A route that took the request and answered "not found" (`/metrics` to a stranger)
        // looks like a path nothing serves.
        if allowed.isEmpty || allowed.contains(request.method) {
            response = HTTP.failed(WebAuthnError(.notFound, "nothing is served at this path"), status: .notFound)
        } else {
            let names = allowed.map(\.rawValue).sorted()
            response = HTTP.failed(
                WebAuthnError(.methodNotAllowed, "this path answers \(names.joined(separator: ", ")), not \(request.method.rawValue)"),
                status: .methodNotAllowed)
            response.headers[.allow] = names.joined(separator: ", ")
        }
        // The length GET would send, without the body (RFC 9110 §8.6; re-check of round 27: it said 0).
        if request.method == .head { response = response.createHeadResponse() }
        return response
    }
}

/// A router that records each route it is given in a ``RouteTable`` before handing it on.
struct RecordingRouter<Context: RequestContext>: RouterMethods {
    let router: Router<Context>
    let table: RouteTable

    @discardableResult func on<Responder: HTTPResponder>(_ path: RouterPath, method: HTTPRequest.Method, responder: Responder) -> Self
    where Responder.Context == Context {
        table.add(path, method: method)
        router.on(path, method: method, responder: responder)
        return self
    }

    @discardableResult func add(middleware: any MiddlewareProtocol<Request, Response, Context>) -> Self {
        router.add(middleware: middleware)
        return self
    }
}
