"""What several methods share: the decode context and run builder, verification, draft
policies, n-gram indexes, trees and their budgets. Not methods themselves."""
