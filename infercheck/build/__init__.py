"""Engine trees and the builds that turn a tree into a runnable engine env."""
