// Package wire is the fence v1 HTTP API's wire format, shared by the server
// (package httpapi) and the Go client (package client): the JSON bodies of
// requests and answers, the header names, and the one table of problem
// codes, which maps the errors of package fence to codes and statuses and
// back. It registers nothing and imports only package fence, so a program
// that uses the client carries none of the server.
package wire
