// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "swift-webauthn-engine",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "WebAuthnCore", targets: ["WebAuthnCore"]),
        .library(name: "WebAuthnMetadata", targets: ["WebAuthnMetadata"]),
        .library(name: "SignInWithApple", targets: ["SignInWithApple"]),
        .library(name: "WebAuthnTesting", targets: ["WebAuthnTesting"]),
        .library(name: "WebAuthnConformance", targets: ["WebAuthnConformance"]),
        .library(name: "WebAuthnServer", targets: ["WebAuthnServer"]),
        .library(name: "WebAuthnSQLite", targets: ["WebAuthnSQLite"]),
        .library(name: "WebAuthnPostgres", targets: ["WebAuthnPostgres"]),
        // The binary a deployment runs: serve, verify, inspect, metadata. It links no testing code.
        .executable(name: "webauthn", targets: ["webauthn"]),
        // Developer tools that drive the software authenticator: conformance, demo.
        .executable(name: "webauthn-dev", targets: ["webauthn-dev"]),
        // The benchmark against raw OpenSSL.
        .executable(name: "webauthn-bench", targets: ["webauthn-bench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.0.0"),
        // HTTP fields built once (the security headers); already in the graph through Hummingbird.
        .package(url: "https://github.com/apple/swift-http-types", from: "1.0.0"),
        // The SQLite store: statements prepared once per connection, a reader pool (WAL), the system SQLite.
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        // NIOConcurrencyHelpers: a pthread lock that ThreadSanitizer sees (Synchronization.Mutex
        // on Linux is a futex it cannot, so locked state showed false races under TSan).
        .package(url: "https://github.com/apple/swift-nio", from: "2.65.0"),
        // NIOHTTPTypes (already in the graph through Hummingbird): the request deadline's channel handler.
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.20.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
        // `make docs`: the DocC catalogs of WebAuthnCore, WebAuthnServer and SignInWithApple.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.4.0"),
        // `webauthn-dev loadtest`: latency percentiles in an HDR histogram.
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.1.0"),
        // `webauthn serve`'s /metrics: swift-metrics counters and timers, in Prometheus text format.
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.1.0"),
    ],
    targets: [
        // The only two C libraries of the engine, each imported by one target only
        // (`internal import`): _WebAuthnCrypto and _WebAuthnEncoding (see Docs/CInterop.md).
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),
        .systemLibrary(
            name: "CCBOR",
            pkgConfig: "libcbor",
            providers: [.apt(["libcbor-dev"])]
        ),
        // Not products, not API (the underscore): CBOR, JSON, base64url, DER, JWS and the
        // one error type; then keys, signatures, certificates and digests over OpenSSL.
        // Their declarations are `package`, except `WebAuthnError` and `COSEAlgorithm`,
        // which WebAuthnCore re-exports.
        .target(
            name: "_WebAuthnEncoding",
            dependencies: ["CCBOR"],
            swiftSettings: strict
        ),
        .target(
            name: "_WebAuthnCrypto",
            dependencies: ["_WebAuthnEncoding", "COpenSSL", .product(name: "NIOConcurrencyHelpers", package: "swift-nio")],
            swiftSettings: strict
        ),
        // One capped HTTP/1.1 exchange on a socket of its own (TLS through _WebAuthnCrypto's
        // OpenSSL), for Sign in with Apple's endpoints and the FIDO metadata service: `package` access.
        .target(
            name: "_WebAuthnHTTP",
            dependencies: ["_WebAuthnEncoding", "_WebAuthnCrypto"],
            swiftSettings: strict
        ),
        // Release builds keep every safety check: no unsafe flags (see Docs/Safety.md),
        // which also lets other packages depend on this one by version.
        .target(
            name: "WebAuthnCore",
            dependencies: ["_WebAuthnEncoding", "_WebAuthnCrypto", .product(name: "NIOConcurrencyHelpers", package: "swift-nio")],
            swiftSettings: strict
        ),
        // FIDO Metadata Service BLOBs and statements, read from files or fetched on schedule.
        .target(
            name: "WebAuthnMetadata",
            dependencies: [
                "WebAuthnCore", "_WebAuthnEncoding", "_WebAuthnCrypto", "_WebAuthnHTTP",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        // Sign in with Apple, server side: identity tokens, Apple's keys, the client secret,
        // code exchange and revocation, server-to-server notifications (HTTP through _WebAuthnHTTP).
        .target(
            name: "SignInWithApple",
            dependencies: ["WebAuthnCore", "_WebAuthnEncoding", "_WebAuthnCrypto", "_WebAuthnHTTP"],
            swiftSettings: strict
        ),
        // A software authenticator, a test CA, the store contract suite and a stand-in for
        // Apple's Sign in with Apple endpoints, for tests of relying parties.
        .target(
            name: "WebAuthnTesting",
            dependencies: ["WebAuthnCore", "SignInWithApple", "_WebAuthnEncoding", "_WebAuthnCrypto"],
            swiftSettings: strict
        ),
        // sqlite3_config (variadic, so not callable from Swift): the store's process-wide SQLite settings.
        .systemLibrary(
            name: "CSQLiteConfig",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        // The embedded default store.
        .target(
            name: "WebAuthnSQLite",
            dependencies: [
                "WebAuthnCore", "_WebAuthnEncoding", "_WebAuthnCrypto", "CSQLiteConfig",
                .product(name: "GRDB", package: "GRDB.swift"), .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        // libpq, PostgreSQL's client library (linked against the system OpenSSL).
        .systemLibrary(
            name: "CPostgreSQL",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        // The store for several instances sharing one PostgreSQL.
        .target(
            name: "WebAuthnPostgres",
            dependencies: [
                "WebAuthnCore", "_WebAuthnEncoding", "_WebAuthnCrypto", "CPostgreSQL",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        // HTTP routes (FIDO2 conformance API, demo page, well-known files) as Hummingbird
        // route collections a host app mounts, and `buildApplication` for `webauthn serve`.
        .target(
            name: "WebAuthnServer",
            dependencies: [
                "WebAuthnCore", "WebAuthnMetadata", "SignInWithApple", "_WebAuthnEncoding", "_WebAuthnCrypto",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: strict
        ),
        // The FIDO2 server conformance runner, as a library (tested in-process).
        .target(
            name: "WebAuthnConformance",
            dependencies: ["WebAuthnCore", "WebAuthnMetadata", "WebAuthnTesting", "_WebAuthnEncoding", "_WebAuthnCrypto"],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "webauthn",
            dependencies: [
                "WebAuthnCore", "WebAuthnMetadata", "WebAuthnServer", "WebAuthnSQLite", "WebAuthnPostgres", "SignInWithApple",
                "_WebAuthnEncoding", "_WebAuthnCrypto", "_WebAuthnHTTP",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "webauthn-dev",
            dependencies: [
                "WebAuthnCore", "WebAuthnTesting", "WebAuthnConformance", "SignInWithApple", "_WebAuthnEncoding",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "webauthn-bench",
            dependencies: [
                "WebAuthnCore", "WebAuthnTesting", "_WebAuthnEncoding", "_WebAuthnCrypto", "WebAuthnServer", "WebAuthnSQLite",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "WebAuthnCoreTests",
            dependencies: ["WebAuthnCore", "WebAuthnMetadata", "WebAuthnTesting", "_WebAuthnEncoding", "_WebAuthnCrypto"]
        ),
        .testTarget(
            name: "WebAuthnServerTests",
            dependencies: [
                "WebAuthnCore", "WebAuthnMetadata", "WebAuthnTesting", "WebAuthnServer", "WebAuthnSQLite", "WebAuthnPostgres",
                "WebAuthnConformance", "_WebAuthnEncoding", "_WebAuthnCrypto", "_WebAuthnHTTP",
                // The metadata stand-in's TLS server side (test code only; see Support/LoopbackTLSServer.swift).
                "COpenSSL",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Hummingbird", package: "hummingbird"),
                // The request deadline's handler on an embedded channel, and the metrics' factory.
                .product(name: "NIOEmbedded", package: "swift-nio"), .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .target(name: "webauthn"), .target(name: "webauthn-dev"),
            ]
        ),
        .testTarget(
            name: "SignInWithAppleTests",
            dependencies: ["SignInWithApple", "WebAuthnCore", "WebAuthnTesting", "_WebAuthnEncoding", "_WebAuthnCrypto"]
        ),
        .testTarget(
            name: "WebAuthnCLITests",
            dependencies: [
                "WebAuthnCore", "WebAuthnTesting", "_WebAuthnEncoding", "_WebAuthnCrypto", .target(name: "webauthn"), .target(name: "webauthn-dev"),
                .target(name: "webauthn-bench"),
            ]
        ),
    ]
)

/// Every target: imports are internal unless marked (`public import` is the API's
/// dependency list), and a member is visible only where its module is imported.
let strict: [SwiftSetting] = [
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
]
