public import Foundation
#if canImport(FoundationNetworking)
    internal import FoundationNetworking
#endif
public import WebAuthnCore
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// Where the key cache gets Apple's key set from: the bytes of a JWKS. Tests
/// give their own; ``AppleHTTPKeyFetcher`` asks Apple.
public protocol AppleKeyFetching: Sendable {
    /// The JWKS bytes, or an error (any error: the cache keeps its last good set).
    func fetchKeySet() async throws -> [UInt8]
}

/// The former name of ``AppleHTTPKeyFetcher``, from when the fetch went through URLSession.
@available(*, deprecated, renamed: "AppleHTTPKeyFetcher")
public typealias URLSessionAppleKeyFetcher = AppleHTTPKeyFetcher

/// Fetches `<baseURL>/auth/keys` with the package's capped HTTP client, a timeout and a 64 KiB cap.
public struct AppleHTTPKeyFetcher: AppleKeyFetching {
    /// The key set's URL.
    public let url: URL
    /// The timeout, in seconds.
    public let timeout: TimeInterval

    /// A fetcher for the configuration's `<baseURL>/auth/keys`.
    public init(configuration: SignInWithAppleConfiguration) {
        self.url = configuration.endpoint("keys")
        self.timeout = configuration.requestTimeout
    }

    /// GETs the key set; throws `apple_endpoint_unavailable` unless Apple answers 200 within the limits.
    public func fetchKeySet() async throws -> [UInt8] {
        var request = URLRequest(url: url)
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        let response = try await AppleHTTP.send(request, maxBytes: AppleKeySet.maxSize, timeout: timeout)
        guard response.status == 200 else {
            throw WebAuthnError(.appleEndpointUnavailable, "\(url.absoluteString) answered HTTP \(response.status)")
        }
        return response.body
    }
}

/// Apple's keys, fetched on first use and kept.
///
/// A token whose `kid` the held set lacks makes the cache fetch again, at most
/// once per ``refetchInterval`` (by the injected clock): a flood of tokens with
/// made-up kids costs Apple one request a minute, not one each. One fetch runs at
/// a time; callers that arrive meanwhile wait for it. When a fetch fails (network,
/// status, an invalid set) the last good set stays in use. While no set has ever
/// been fetched, failed fetches are retried at most every ``retryInterval``.
public actor AppleKeyCache {
    /// The least time between two fetches once a set is held: 60 seconds.
    public nonisolated let refetchInterval: TimeInterval
    /// The least time between two fetches while no set is held: 5 seconds.
    public nonisolated let retryInterval: TimeInterval

    private let fetcher: any AppleKeyFetching
    private let clock: WebAuthnClock
    private var keys: AppleKeySet?
    private var lastAttempt: Date?
    private var lastError: WebAuthnError?
    private var inFlight: (id: Int, task: Task<Result<AppleKeySet, WebAuthnError>, Never>)?
    private var nextID = 0
    /// How many fetches the cache has started (for monitoring and tests).
    public private(set) var fetchCount = 0

    /// A cache over `fetcher`, timed by `clock`.
    public init(fetcher: any AppleKeyFetching, clock: WebAuthnClock = .system, refetchInterval: TimeInterval = 60, retryInterval: TimeInterval = 5) {
        self.fetcher = fetcher
        self.clock = clock
        self.refetchInterval = refetchInterval
        self.retryInterval = retryInterval
    }

    /// A key set that has `kid` if one can be had within the refetch limits.
    ///
    /// Returns the held set when it has the key; otherwise fetches (or joins the
    /// fetch under way) when the limits allow, and returns the newest good set
    /// whether or not it has the key (verification then says `apple_key_unknown`).
    /// Throws `apple_jwks_unavailable` when no good set was ever fetched.
    public func keySet(containing kid: String) async throws(WebAuthnError) -> AppleKeySet {
        if let keys, keys.contains(keyID: kid) { return keys }
        if inFlight != nil || mayFetch() {
            await refresh()
        }
        guard let keys else {
            throw WebAuthnError(.appleJWKSUnavailable, "Apple's keys could not be fetched: \(lastError?.message ?? "not fetched yet")")
        }
        return keys
    }

    /// The held set, if any, without fetching.
    public var current: AppleKeySet? { keys }

    private func mayFetch() -> Bool {
        guard let lastAttempt else { return true }
        let interval = keys == nil ? retryInterval : refetchInterval
        return clock.now().timeIntervalSince(lastAttempt) >= interval
    }

    /// Starts a fetch, or waits for the one under way, and keeps its set if it is good.
    private func refresh() async {
        let id: Int
        let task: Task<Result<AppleKeySet, WebAuthnError>, Never>
        if let running = inFlight {
            (id, task) = running
        } else {
            nextID += 1
            fetchCount += 1
            lastAttempt = clock.now()
            let fetcher = self.fetcher
            id = nextID
            task = Task {
                do {
                    return .success(try AppleKeySet(json: try await fetcher.fetchKeySet()))
                } catch let error as WebAuthnError {
                    return .failure(error)
                } catch {
                    return .failure(WebAuthnError(.appleEndpointUnavailable, "fetching Apple's keys failed: \(error)"))
                }
            }
            inFlight = (id, task)
        }
        let result = await task.value
        guard inFlight?.id == id else { return }  // another waiter already applied it
        inFlight = nil
        switch result {
        case .success(let set): keys = set; lastError = nil
        case .failure(let error): lastError = error
        }
    }
}
