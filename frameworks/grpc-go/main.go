// fairground's gRPC service (bench.proto) on grpc-go, Debian's
// golang-google-grpc-dev 1.33, the way grpc-go's own examples serve it: a
// grpc.Server with its own HTTP/2 transport on a net.Listener, the service
// registered through the code protoc-gen-go and protoc-gen-go-grpc
// generated from bench.proto at image build (package benchpb). gRPC over
// HTTP/2 with prior knowledge on 8082, and over TLS (ALPN h2) on 8443 when
// fairground gives a certificate. HTTP/1.1 on 8080 is net/http, for
// fairground's readiness probe (no scenario is declared
// there): gRPC needs HTTP/2.
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	pb "fairground/app/benchpb"
)

// bench implements pb.BenchServer. Embedding UnimplementedBenchServer is
// what protoc-gen-go-grpc asks of every server; a method the service does
// not have never reaches it: grpc.Server answers it UNIMPLEMENTED itself.
type bench struct {
	pb.UnimplementedBenchServer
}

// Echo returns the request's id and payload, unchanged.
func (bench) Echo(_ context.Context, req *pb.EchoRequest) (*pb.EchoReply, error) {
	return &pb.EchoReply{Id: req.GetId(), Payload: req.GetPayload()}, nil
}

// Sum adds the values; Go's int64 addition wraps on overflow
// (two's complement), as bench.proto asks.
func (bench) Sum(_ context.Context, req *pb.SumRequest) (*pb.SumReply, error) {
	var sum int64
	for _, v := range req.GetValues() {
		sum += v
	}
	return &pb.SumReply{Sum: sum}, nil
}

// Stream sends count replies, each with the request's id and its index.
func (bench) Stream(req *pb.StreamRequest, stream pb.Bench_StreamServer) error {
	id, count := req.GetId(), req.GetCount()
	for i := uint32(0); i < count; i++ {
		if err := stream.Send(&pb.StreamReply{Id: id, Index: i}); err != nil {
			return err
		}
	}
	return nil
}

// serve runs s on a TCP listener on port; it returns only on failure.
func serve(s *grpc.Server, port int) error {
	lis, err := net.Listen("tcp", fmt.Sprintf("0.0.0.0:%d", port))
	if err != nil {
		return err
	}
	return s.Serve(lis)
}

func plaintext(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" && r.URL.Path != "/plaintext" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	io.WriteString(w, "Hello, World!")
}

func main() {
	cpus, err := strconv.Atoi(os.Getenv("FAIRGROUND_CPUS"))
	if err != nil || cpus < 1 {
		cpus = 1
	}
	runtime.GOMAXPROCS(cpus)

	// gRPC with prior knowledge on plain TCP: grpc.Server's own transport.
	h2cPort := portEnv("FAIRGROUND_H2C_PORT", 8082)
	h2c := grpc.NewServer()
	pb.RegisterBenchServer(h2c, bench{})
	go func() { log.Fatal(serve(h2c, h2cPort)) }()
	log.Printf("grpc-go (h2c) listening on :%d", h2cPort)

	// gRPC over TLS only when fairground mounted a certificate; grpc-go's
	// TLS credentials (crypto/tls) offer ALPN h2.
	if cert := os.Getenv("FAIRGROUND_TLS_CERT"); cert != "" {
		creds, err := credentials.NewServerTLSFromFile(cert, os.Getenv("FAIRGROUND_TLS_KEY"))
		if err != nil {
			log.Fatalf("TLS certificate: %v", err)
		}
		tlsPort := portEnv("FAIRGROUND_TLS_PORT", 8443)
		tls := grpc.NewServer(grpc.Creds(creds))
		pb.RegisterBenchServer(tls, bench{})
		go func() { log.Fatal(serve(tls, tlsPort)) }()
		log.Printf("grpc-go (TLS, h2) listening on :%d", tlsPort)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("/", plaintext)
	log.Printf("net/http listening on :8080 with GOMAXPROCS=%d", cpus)
	log.Fatal(http.ListenAndServe("0.0.0.0:8080", mux))
}

// portEnv reads a port from the environment variable name, or def.
func portEnv(name string, def int) int {
	if p, err := strconv.Atoi(os.Getenv(name)); err == nil && p > 0 {
		return p
	}
	return def
}
