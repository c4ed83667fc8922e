// Package runreport turns a fence chaos run into its reports: the
// summary that -o json writes (Summary) and the text one (Print), and the
// self-contained HTML page of --report (WriteHTML): the verdict, the
// violations linked to the operations they name, a timeline of grants,
// writes and faults, porcupine's visualisation, and the command line that
// replays the run.
package runreport
