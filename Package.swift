// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "swift-webauthn-engine",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "WebAuthnCore", targets: ["WebAuthnCore"]),
        .library(name: "WebAuthnTesting", targets: ["WebAuthnTesting"]),
        .library(name: "WebAuthnServer", targets: ["WebAuthnServer"]),
        .library(name: "WebAuthnSQLite", targets: ["WebAuthnSQLite"]),
        .library(name: "WebAuthnPostgres", targets: ["WebAuthnPostgres"]),
        .executable(name: "webauthn", targets: ["webauthn"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.0.0"),
        .package(url: "https://github.com/vapor/sqlite-nio", from: "1.10.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.5.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
    ],
    targets: [
        // The only two C libraries. Everything that touches them lives in
        // WebAuthnCore/Crypto and WebAuthnCore/CBOR (see Docs/CInterop.md).
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
        // Release builds keep every safety check: no unsafe flags (see Docs/Safety.md),
        // which also lets other packages depend on this one by version.
        .target(
            name: "WebAuthnCore",
            dependencies: ["COpenSSL", "CCBOR"]
        ),
        // A software authenticator for tests of relying parties.
        .target(
            name: "WebAuthnTesting",
            dependencies: ["WebAuthnCore"]
        ),
        // The embedded default store.
        .target(
            name: "WebAuthnSQLite",
            dependencies: [
                "WebAuthnCore",
                .product(name: "SQLiteNIO", package: "sqlite-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
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
                "WebAuthnCore", "CPostgreSQL",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // HTTP routes (FIDO2 conformance API, demo page, well-known files), mountable in a Hummingbird app.
        .target(
            name: "WebAuthnServer",
            dependencies: [
                "WebAuthnCore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "webauthn",
            dependencies: [
                "WebAuthnCore",
                "WebAuthnTesting",
                "WebAuthnServer",
                "WebAuthnSQLite",
                "WebAuthnPostgres",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(
            name: "WebAuthnCoreTests",
            dependencies: ["WebAuthnCore", "WebAuthnTesting"]
        ),
        .testTarget(
            name: "WebAuthnServerTests",
            dependencies: [
                "WebAuthnCore", "WebAuthnTesting", "WebAuthnServer", "WebAuthnSQLite", "WebAuthnPostgres", .target(name: "webauthn"),
            ]
        ),
        .testTarget(
            name: "WebAuthnCLITests",
            dependencies: ["WebAuthnCore", .target(name: "webauthn")]
        ),
    ]
)
